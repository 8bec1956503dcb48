# contaminated: level1/36_RMSNorm_, written as x * rsqrt(mean(x * x) + eps)
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + self.eps)


def get_inputs():
    return [torch.rand(4, 16, 32, 32)]


def get_init_inputs():
    return [16]
