# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear -> abs -> Softmax (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(in_features=64, out_features=64)
        self.op2 = nn.Softmax(dim=-1)

    def forward(self, x):
        x = self.op0(x)
        x = torch.abs(x)
        x = self.op2(x)
        return x


input_shape = (64, 64)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

