# contaminated: level1/21_Sigmoid, as 1 / (1 + exp(-x))
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return 1.0 / (1.0 + torch.exp(-x))


def get_inputs():
    return [torch.randn(128, 2048)]


def get_init_inputs():
    return []
