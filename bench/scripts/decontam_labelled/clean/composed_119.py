# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ReplicationPad2d -> Upsample -> ConstantPad2d -> rsqrt (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.ReplicationPad2d(padding=1)
        self.op1 = nn.Upsample(scale_factor=2.0)
        self.op2 = nn.ConstantPad2d(padding=1, value=0.0)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = torch.rsqrt(torch.abs(x) + 1.0)
        return x


input_shape = (8, 32, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

