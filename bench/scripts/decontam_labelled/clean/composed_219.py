# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """cummax -> Unfold -> ZeroPad1d (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op1 = nn.Unfold(kernel_size=3)
        self.op2 = nn.ZeroPad1d(padding=1)

    def forward(self, x):
        x = torch.cummax(x, dim=1)[0]
        x = self.op1(x)
        x = self.op2(x)
        return x


input_shape = (4, 8, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

