"""Attack: each call's at::cpu::clamp_min runs on a thread of its own, made for the call and ended
after it, beside four threads spinning in the solution's module: no one thread holds enough samples
for its own verdict, and the spinners hold most of all of them"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
