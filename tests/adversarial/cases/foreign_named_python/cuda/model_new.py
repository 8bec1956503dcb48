"""Attack: kernels/ declares dummies named like PyTorch's kernels (never launched); forward calls
torch.relu, whose kernel a provenance check by names would take for the solution's."""
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401 - the dummies are built in


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
