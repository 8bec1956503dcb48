# clean: near miss of level2/1_Conv2D_ReLU_BiasAdd: then a squeeze-and-excitation gate (a new fusion)
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, reduction):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))
        self.fc1 = nn.Linear(out_channels, out_channels // reduction)
        self.fc2 = nn.Linear(out_channels // reduction, out_channels)

    def forward(self, x):
        y = torch.relu(self.conv(x)) + self.bias
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(y.mean(dim=(2, 3))))))
        return y * s[:, :, None, None]


def get_inputs():
    return [torch.rand(4, 8, 24, 24)]


def get_init_inputs():
    return [8, 16, 3, 4]
