# contaminated: level1/34_InstanceNorm, written out: per-sample, per-channel mean and variance
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.eps = 1e-5

    def forward(self, x):
        mu = x.mean(dim=(2, 3), keepdim=True)
        sigma2 = ((x - mu) ** 2).mean(dim=(2, 3), keepdim=True)
        return (x - mu) / (sigma2 + self.eps).sqrt()


def get_inputs():
    return [torch.rand(4, 16, 32, 32)]


def get_init_inputs():
    return [16]
