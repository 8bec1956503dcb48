# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Softmax -> rsqrt -> BatchNorm2d -> Upsample (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.Softmax(dim=-1)
        self.op2 = nn.BatchNorm2d(num_features=32)
        self.op3 = nn.Upsample(scale_factor=2.0)

    def forward(self, x):
        x = self.op0(x)
        x = torch.rsqrt(torch.abs(x) + 1.0)
        x = self.op2(x)
        x = self.op3(x)
        return x


input_shape = (4, 32, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

