# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """normalize -> ReflectionPad2d -> AdaptiveAvgPool2d (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op1 = nn.ReflectionPad2d(padding=1)
        self.op2 = nn.AdaptiveAvgPool2d(output_size=4)

    def forward(self, x):
        x = F.normalize(x)
        x = self.op1(x)
        x = self.op2(x)
        return x


input_shape = (8, 16, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

