"""Attack: the binding makes the fatbin wall's pages over libtorch_cuda's GPU code writable (mprotect, MAP_FIXED, munmap) to write back the code its build can carry in its own module, then runs at::cuda::clamp_min"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
