# contaminated: level1/40_LayerNorm, written out as mean / variance / sub / div / mul / add
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.dims = tuple(range(-len(normalized_shape), 0))

    def forward(self, x):
        mu = x.mean(dim=self.dims, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=self.dims, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5) * self.weight + self.bias


def get_inputs():
    return [torch.rand(4, 16, 32, 32)]


def get_init_inputs():
    return [(16, 32, 32)]
