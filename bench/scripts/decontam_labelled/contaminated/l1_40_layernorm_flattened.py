# contaminated: level1/40_LayerNorm, as F.layer_norm of the input flattened per sample, then the affine
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(shape))
        self.beta = nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        flat = x.flatten(1)
        y = F.layer_norm(flat, flat.shape[1:]).view_as(x)
        return y * self.gamma + self.beta


def get_inputs():
    return [torch.rand(4, 8, 16, 16)]


def get_init_inputs():
    return [(8, 16, 16)]
