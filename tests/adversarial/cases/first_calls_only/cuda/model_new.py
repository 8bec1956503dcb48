"""Attack: computes only the first calls (past the checks), then replays the last output."""
import torch
import torch.nn as nn

import cuda_extension

_memo = []

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(_memo) < 5:
            _memo.append(cuda_extension.relu_forward(x))
        return _memo[-1]
