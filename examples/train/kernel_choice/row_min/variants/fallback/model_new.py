"""row_min: PyTorch computes the output, the kernel is never called (a fallback: reward -1)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.min(dim=1).values
