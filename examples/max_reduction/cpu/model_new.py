"""torch.max(x, dim)[0] through one OpenMP C++ kernel: the CPU twin of ../cuda
(KernelBench level1/49_Max_reduction_over_a_dimension)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.max_reduction_forward(x, self.dim)
