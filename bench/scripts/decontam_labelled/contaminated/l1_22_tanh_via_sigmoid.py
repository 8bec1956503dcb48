# contaminated: level1/22_Tanh, as 2 sigmoid(2x) - 1
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return 2.0 * torch.sigmoid(2.0 * x) - 1.0


def get_inputs():
    return [torch.randn(128, 2048)]


def get_init_inputs():
    return []
