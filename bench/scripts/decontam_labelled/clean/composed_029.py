# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LPPool3d -> erf -> Sigmoid (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.LPPool3d(norm_type=2, kernel_size=3)
        self.op2 = nn.Sigmoid()

    def forward(self, x):
        x = self.op0(x)
        x = torch.erf(x)
        x = self.op2(x)
        return x


input_shape = (4, 16, 8, 8, 8)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

