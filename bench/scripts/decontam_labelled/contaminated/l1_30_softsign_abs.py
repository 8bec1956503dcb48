# contaminated: level1/30_Softsign, written out
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x / (x.abs() + 1)


def get_inputs():
    return [torch.randn(128, 2048)]


def get_init_inputs():
    return []
