# contaminated: level1/32_HardTanh, as clamp
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.clamp(-1.0, 1.0)


def get_inputs():
    return [torch.randn(128, 2048) * 2]


def get_init_inputs():
    return []
