# contaminated: level1/19_ReLU, as x times a mask
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * (x > 0).to(x.dtype)


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
