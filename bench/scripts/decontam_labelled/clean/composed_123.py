# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LogSigmoid -> matmul_self_t -> UpsamplingBilinear2d (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.LogSigmoid()
        self.op2 = nn.UpsamplingBilinear2d(scale_factor=2.0)

    def forward(self, x):
        x = self.op0(x)
        x = torch.matmul(x, x.transpose(-1, -2))
        x = self.op2(x)
        return x


input_shape = (2, 32, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

