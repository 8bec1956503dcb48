"""Attack: its own kernel for the first 8 calls (the checks, then some: when kernel records were
taken only during the checks), torch.relu for every later call."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return cuda_extension.relu_forward(x) if self.calls <= 8 else torch.relu(x)
