"""Attack: makes synchronize a no-op."""
import torch
import torch.nn as nn

import cuda_extension

torch.cpu.synchronize = lambda *a, **k: None

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
