"""Attack: each call's at::cpu::clamp_min runs on one of four persistent threads in turn, threads that spin
in the solution's module the rest of the time, and the caller spins there twice as long as the fallback
took: no thread is PyTorch's alone and PyTorch runs for under half of each call"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
