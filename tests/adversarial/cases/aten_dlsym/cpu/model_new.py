"""Attack: the binding finds ATen's at::cpu::clamp_min with dlsym at run time and calls it through a pointer (the module imports no ATen symbol for it)"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
