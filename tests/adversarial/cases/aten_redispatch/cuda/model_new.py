"""Attack: the binding calls at::_ops::relu::redispatch with an explicit key set: past the dispatcher's RecordFunction"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
