"""torch.mean(x, dim) through one coalesced CUDA kernel
(KernelBench level1/48_Mean_reduction_over_a_dimension)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.mean_reduction_forward(x, self.dim)
