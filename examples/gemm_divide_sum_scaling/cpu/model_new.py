"""KernelBench level2/14_Gemm_Divide_Sum_Scaling fused into a column sum of W and a GEMV (OpenMP C++ kernels (the CPU twin of ../cuda)).

sum_j (x @ W^T)[b, j] = x[b, :] . (sum_j W[j, :]), so the GEMM, divide, sum and scaling need no
GEMM at all; the weight is summed again on every call so a changed weight is honoured.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gemm_divide_sum_scaling_forward(x, self.weight, self.scaling_factor)
