# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """UpsamplingBilinear2d -> Softmax2d -> Softmin -> prod (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.UpsamplingBilinear2d(scale_factor=2.0)
        self.op1 = nn.Softmax2d()
        self.op2 = nn.Softmin(dim=-1)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = torch.prod(x, dim=1)
        return x


input_shape = (8, 16, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

