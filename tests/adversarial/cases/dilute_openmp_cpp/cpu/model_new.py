"""Attack: an OpenMP team in the binding: one thread runs ATen's at::cpu::clamp_min (no RecordFunction
fires), the others spin in the solution's own module until it is done, so most of the candidate's
computing samples are the solution's"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
