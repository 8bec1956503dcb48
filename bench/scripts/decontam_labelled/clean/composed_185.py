# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """CELU -> Hardshrink -> amin (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.CELU()
        self.op1 = nn.Hardshrink()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = torch.amin(x, dim=1)
        return x


input_shape = (2, 8, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

