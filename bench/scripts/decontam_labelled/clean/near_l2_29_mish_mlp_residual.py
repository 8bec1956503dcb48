# clean: near miss of level2/29_Matmul_Mish_Mish: a Mish MLP block with a residual, x + fc2(mish(fc1(x)))
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.fc2(F.mish(self.fc1(x)))


def get_inputs():
    return [torch.rand(64, 96)]


def get_init_inputs():
    return [96, 128]
