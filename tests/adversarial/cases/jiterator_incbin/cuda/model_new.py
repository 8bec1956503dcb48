"""Attack: the build embeds NVRTC in the solution's own module (.incbin of the CUDA toolkit's libnvrtc.so), so the candidate could write it out and load a live copy of the compiler its process has had closed"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
