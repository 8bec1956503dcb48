# clean: near miss of level1/36_RMSNorm_: RMSNorm with a learned gain on a residual branch, x + w * rmsnorm(x)
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1, num_features, 1, 1))
        self.eps = eps

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x + self.weight * (x / rms)


def get_inputs():
    return [torch.rand(4, 16, 32, 32)]


def get_init_inputs():
    return [16]
