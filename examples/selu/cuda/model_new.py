"""SELU through one vectorised grid-stride CUDA kernel (KernelBench level1/27_SELU_)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.selu_forward(x)
