# contaminated: level1/35_GroupNorm_, written out: channels viewed as groups, mean / var / normalise / affine
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features, num_groups):
        super().__init__()
        self.groups = num_groups
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))

    def forward(self, x):
        n, c, h, w = x.shape
        g = x.reshape(n, self.groups, -1)
        mean = g.mean(dim=-1, keepdim=True)
        var = g.var(dim=-1, keepdim=True, unbiased=False)
        y = ((g - mean) / torch.sqrt(var + 1e-5)).reshape(n, c, h, w)
        return y * self.weight.view(1, c, 1, 1) + self.bias.view(1, c, 1, 1)


def get_inputs():
    return [torch.rand(4, 16, 32, 32)]


def get_init_inputs():
    return [16, 4]
