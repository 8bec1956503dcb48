# contaminated: level1/23_Softmax, written out as exp(x - max) / sum
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.max(dim=1, keepdim=True).values)
        return e / e.sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.rand(64, 4096)]


def get_init_inputs():
    return []
