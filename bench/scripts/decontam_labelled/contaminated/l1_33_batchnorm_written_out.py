# contaminated: level1/33_BatchNorm, written out in training form (batch statistics, affine)
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(num_features))
        self.beta = nn.Parameter(torch.zeros(num_features))

    def forward(self, x):
        mean = x.mean(dim=(0, 2, 3), keepdim=True)
        var = x.var(dim=(0, 2, 3), keepdim=True, unbiased=False)
        x_hat = (x - mean) * torch.rsqrt(var + 1e-5)
        return x_hat * self.gamma[None, :, None, None] + self.beta[None, :, None, None]


def get_inputs():
    return [torch.rand(8, 16, 32, 32)]


def get_init_inputs():
    return [16]
