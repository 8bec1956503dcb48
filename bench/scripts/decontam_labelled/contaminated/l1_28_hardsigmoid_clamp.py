# contaminated: level1/28_HardSigmoid, as a clamp
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.clamp(x / 6.0 + 0.5, 0.0, 1.0)


def get_inputs():
    return [torch.randn(128, 2048) * 4]


def get_init_inputs():
    return []
