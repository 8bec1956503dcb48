# clean: near miss of level1/40_LayerNorm: LayerNorm over the last dimension, gated by sigmoid(z) of a second input
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, z):
        return self.norm(x) * torch.sigmoid(z) * z


def get_inputs():
    return [torch.rand(64, 96), torch.rand(64, 96)]


def get_init_inputs():
    return [96]
