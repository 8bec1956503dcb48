# contaminated: level1/27_SELU_, with its constants written out
import torch
import torch.nn as nn

ALPHA, SCALE = 1.6732632423543772, 1.0507009873554805


class Model(nn.Module):
    def forward(self, x):
        return SCALE * torch.where(x > 0, x, ALPHA * (torch.exp(x) - 1))


def get_inputs():
    return [torch.randn(128, 2048)]


def get_init_inputs():
    return []
