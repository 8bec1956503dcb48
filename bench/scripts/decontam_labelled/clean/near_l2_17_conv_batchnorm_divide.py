# clean: near miss of level2/17_Conv2d_InstanceNorm_Divide: batch statistics (a BatchNorm in training mode) in place of the InstanceNorm (the same ops once decomposed, another function)
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divide_by = divide_by

    def forward(self, x):
        y = self.conv(x)
        y = (y - y.mean(dim=(0, 2, 3), keepdim=True)) / torch.sqrt(y.var(dim=(0, 2, 3), keepdim=True, unbiased=False) + 1e-5)
        return y / self.divide_by


def get_inputs():
    return [torch.rand(8, 3, 32, 32)]


def get_init_inputs():
    return [3, 16, 3, 2.0]
