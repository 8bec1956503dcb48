"""LeakyReLU through one OpenMP C++ kernel: the CPU twin of ../cuda (KernelBench level1/20_LeakyReLU)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.leaky_relu_forward(x, self.negative_slope)
