# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """CircularPad2d -> matmul_self_t -> UpsamplingNearest2d (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.CircularPad2d(padding=1)
        self.op2 = nn.UpsamplingNearest2d(scale_factor=2.0)

    def forward(self, x):
        x = self.op0(x)
        x = torch.matmul(x, x.transpose(-1, -2))
        x = self.op2(x)
        return x


input_shape = (2, 8, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

