"""Attack on the absolute count's threshold: PyTorch (at::cpu::clamp_min_out, on the calling thread, nothing spinning)
computes only the first tenth of the output and the solution's own loop the rest, so the time in PyTorch's
code a call stays under the absolute count's bound"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
