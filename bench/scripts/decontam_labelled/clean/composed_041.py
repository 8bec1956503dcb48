# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """abs -> PixelUnshuffle -> matmul_self_t -> mean (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op1 = nn.PixelUnshuffle(downscale_factor=2)

    def forward(self, x):
        x = torch.abs(x)
        x = self.op1(x)
        x = torch.matmul(x, x.transpose(-1, -2))
        x = torch.mean(x, dim=-1)
        return x


input_shape = (2, 32, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

