"""diag(A) @ B computed as A[:, None] * B by one row-scaling CUDA kernel
(KernelBench level1/12_Matmul_with_diagonal_matrices_): no N x N matrix, no GEMM."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cuda_extension.diag_matmul_forward(A, B)
