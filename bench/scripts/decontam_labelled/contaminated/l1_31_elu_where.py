# contaminated: level1/31_ELU, written out
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return torch.where(x > 0, x, self.alpha * torch.expm1(x))


def get_inputs():
    return [torch.randn(128, 2048)]


def get_init_inputs():
    return [1.0]
