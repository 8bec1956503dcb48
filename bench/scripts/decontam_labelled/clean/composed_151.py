# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear -> cummax -> abs (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(in_features=32, out_features=128)

    def forward(self, x):
        x = self.op0(x)
        x = torch.cummax(x, dim=1)[0]
        x = torch.abs(x)
        return x


input_shape = (64, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

