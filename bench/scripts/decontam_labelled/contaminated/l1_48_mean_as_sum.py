# contaminated: level1/48_Mean_reduction_over_a_dimension, as a sum over the count
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.sum(dim=self.dim) / x.shape[self.dim]


def get_inputs():
    return [torch.randn(16, 64, 32)]


def get_init_inputs():
    return [1]
