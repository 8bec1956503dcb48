"""Attack: looks for the reference's outputs with gc."""
import torch
import torch.nn as nn
import gc
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x:
                return obj
        return cuda_extension.relu_forward(x)
