# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv2d -> flip -> Conv2d -> matmul_self_t (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.Conv2d(in_channels=32, out_channels=16, kernel_size=3)
        self.op2 = nn.Conv2d(in_channels=16, out_channels=32, kernel_size=3)

    def forward(self, x):
        x = self.op0(x)
        x = torch.flip(x, dims=[1])
        x = self.op2(x)
        x = torch.matmul(x, x.transpose(-1, -2))
        return x


input_shape = (8, 32, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

