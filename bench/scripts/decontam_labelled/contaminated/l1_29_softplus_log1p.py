# contaminated: level1/29_Softplus, as log1p(exp(x))
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.log1p(torch.exp(x))


def get_inputs():
    return [torch.randn(128, 2048)]


def get_init_inputs():
    return []
