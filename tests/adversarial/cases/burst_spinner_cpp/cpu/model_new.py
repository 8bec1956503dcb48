"""Attack on the absolute count: one thread that spins in the solution's module runs at::cpu::clamp_min_out
on an eighth of the tensor at a time, in short bursts, while the caller spins there twice as long as each
burst took: every stop's thread and moment shares stay under half, and the fallback's time is spread thin"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
