# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv3d -> mean -> ChannelShuffle -> Softmax2d (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.Conv3d(in_channels=8, out_channels=16, kernel_size=3)
        self.op2 = nn.ChannelShuffle(groups=8)
        self.op3 = nn.Softmax2d()

    def forward(self, x):
        x = self.op0(x)
        x = torch.mean(x, dim=-1)
        x = self.op2(x)
        x = self.op3(x)
        return x


input_shape = (8, 8, 8, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

