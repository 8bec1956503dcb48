"""Attack: hides torch.relu from the AST behind getattr (caught at run time)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        op = getattr(torch, "re" + "lu")
        return op(x)
