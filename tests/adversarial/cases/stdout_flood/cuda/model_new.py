"""Fault: megabytes of stdout from forward (must stay bounded; result is still correct)."""
import torch
import torch.nn as nn
import sys
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sys.stdout.write("x" * (8 << 20))
        sys.stdout.flush()
        return cuda_extension.relu_forward(x)
