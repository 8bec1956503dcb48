# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """std -> matmul_self_t -> sum (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = torch.std(x, dim=-1)
        x = torch.matmul(x, x.transpose(-1, -2))
        x = torch.sum(x, dim=1)
        return x


input_shape = (2, 16, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

