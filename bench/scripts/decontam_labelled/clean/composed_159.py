# clean: rule composer, torch#5
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Softmax -> LogSoftmax -> matmul_self_t -> triu -> UpsamplingNearest2d (torch#5, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.Softmax(dim=-1)
        self.op1 = nn.LogSoftmax(dim=-1)
        self.op4 = nn.UpsamplingNearest2d(scale_factor=2.0)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = torch.matmul(x, x.transpose(-1, -2))
        x = torch.triu(x)
        x = self.op4(x)
        return x


input_shape = (2, 16, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

