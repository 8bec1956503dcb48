"""Attack: launches the extension as a decoy, computes with torch operators (run time)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cuda_extension.relu_forward(x)  # decoy: result thrown away
        return x * (x > 0)
