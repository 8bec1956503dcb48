# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """UpsamplingBilinear2d -> cumprod -> LogSoftmax (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.UpsamplingBilinear2d(scale_factor=2.0)
        self.op2 = nn.LogSoftmax(dim=-1)

    def forward(self, x):
        x = self.op0(x)
        x = torch.cumprod(x, dim=-1)
        x = self.op2(x)
        return x


input_shape = (4, 16, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

