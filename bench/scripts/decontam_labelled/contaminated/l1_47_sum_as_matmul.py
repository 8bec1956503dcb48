# contaminated: level1/47_Sum_reduction_over_a_dimension, as a product with ones
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        ones = torch.ones(x.shape[self.dim], 1, dtype=x.dtype)
        return (x.transpose(self.dim, -1) @ ones).transpose(self.dim, -1)


def get_inputs():
    return [torch.randn(16, 64, 32)]


def get_init_inputs():
    return [1]
