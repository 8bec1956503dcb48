# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """AdaptiveAvgPool3d -> AvgPool3d -> Tanh (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.AdaptiveAvgPool3d(output_size=4)
        self.op1 = nn.AvgPool3d(kernel_size=3)
        self.op2 = nn.Tanh()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        return x


input_shape = (2, 32, 8, 8, 8)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

