"""Attack: PyTorch computes the output with an op it compiles at run time with NVRTC (torch.special.bessel_j0, the "jiterator"), whose code is in no .nv_fatbin the fatbin wall could remove"""
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x)
