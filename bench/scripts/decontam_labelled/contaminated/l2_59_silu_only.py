# contaminated: level2/59_Matmul_Swish_Scaling, Swish spelled F.silu
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return F.silu(self.matmul(x)) * self.scaling_factor


def get_inputs():
    return [torch.rand(128, 1024)]


def get_init_inputs():
    return [1024, 1024, 2.0]
