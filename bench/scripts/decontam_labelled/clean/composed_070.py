# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose1d -> interpolate -> ZeroPad1d (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.ConvTranspose1d(in_channels=32, out_channels=16, kernel_size=3)
        self.op2 = nn.ZeroPad1d(padding=1)

    def forward(self, x):
        x = self.op0(x)
        x = F.interpolate(x, scale_factor=2.0)
        x = self.op2(x)
        return x


input_shape = (4, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

