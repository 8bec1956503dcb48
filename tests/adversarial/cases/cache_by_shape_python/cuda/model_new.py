"""Attack: caches the output by input shape on the module."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._cache = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = tuple(x.shape)
        if key not in self._cache:
            self._cache[key] = cuda_extension.relu_forward(x)
        return self._cache[key]
