# clean: near miss of level1/35_GroupNorm_: GroupNorm, a FiLM scale/shift from a second input, then SiLU
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, num_features, num_groups):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, num_features)

    def forward(self, x, scale, shift):
        return F.silu(self.gn(x) * (1 + scale) + shift)


def get_inputs():
    return [torch.rand(4, 16, 32, 32), torch.rand(4, 16, 1, 1), torch.rand(4, 16, 1, 1)]


def get_init_inputs():
    return [16, 4]
