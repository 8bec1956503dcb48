# contaminated: level1/35_GroupNorm_, as F.layer_norm of the channels viewed as groups, then the per-channel affine
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.groups = groups
        self.scale = nn.Parameter(torch.ones(channels))
        self.shift = nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        n, c = x.shape[:2]
        g = x.reshape(n, self.groups, -1)
        y = F.layer_norm(g, g.shape[-1:], eps=1e-5).reshape(x.shape)
        return y * self.scale.view(1, c, 1, 1) + self.shift.view(1, c, 1, 1)


def get_inputs():
    return [torch.rand(4, 16, 12, 12)]


def get_init_inputs():
    return [16, 4]
