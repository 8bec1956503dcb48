"""Attack: torch.nn.functional computes the output."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x)
