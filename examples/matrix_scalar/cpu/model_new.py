"""Matrix-scalar multiplication through one OpenMP C++ kernel: the CPU twin of ../cuda (KernelBench level1/5_Matrix_scalar_multiplication)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return cuda_extension.matrix_scalar_forward(A, s)
