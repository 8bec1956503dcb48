# contaminated: level1/24_LogSoftmax, as x - logsumexp(x)
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x - torch.logsumexp(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(64, 4096)]


def get_init_inputs():
    return []
