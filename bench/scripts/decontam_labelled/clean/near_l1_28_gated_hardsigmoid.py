# clean: near miss of level1/28_HardSigmoid: a gate, x * hardsigmoid(W x) (the gate a projection of x)
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gate = nn.Linear(dim, dim)

    def forward(self, x):
        return x * F.hardsigmoid(self.gate(x))


def get_inputs():
    return [torch.rand(64, 96)]


def get_init_inputs():
    return [96]
