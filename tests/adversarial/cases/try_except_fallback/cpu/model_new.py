"""Attack: falls back to PyTorch when the extension fails."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return cuda_extension.relu_forward(x.double())
        except Exception:
            return torch.relu(x)
