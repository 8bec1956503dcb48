# clean: near miss of level1/26_GELU_: a GEGLU gate, gelu(x W1) * (x W2)
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.proj = nn.Linear(dim, 2 * hidden)

    def forward(self, x):
        a, b = self.proj(x).chunk(2, dim=-1)
        return F.gelu(a) * b


def get_inputs():
    return [torch.rand(64, 96)]


def get_init_inputs():
    return [96, 64]
