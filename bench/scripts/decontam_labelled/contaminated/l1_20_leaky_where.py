# contaminated: level1/20_LeakyReLU, as a where
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return torch.where(x > 0, x, x * self.negative_slope)


def get_inputs():
    return [torch.randn(128, 2048)]


def get_init_inputs():
    return []
