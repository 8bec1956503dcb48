"""Attack: returns a lazy Tensor subclass."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LazyTensor._make_subclass(LazyTensor, cuda_extension.relu_forward(x))


class LazyTensor(torch.Tensor):
    pass
