# clean: near miss of level1/33_BatchNorm: BatchNorm on a residual branch, relu(x + 0.5 * bn(x))
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features)

    def forward(self, x):
        return torch.relu(x + 0.5 * self.bn(x))


def get_inputs():
    return [torch.rand(8, 16, 32, 32)]


def get_init_inputs():
    return [16]
