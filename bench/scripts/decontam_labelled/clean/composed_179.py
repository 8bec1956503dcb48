# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """transpose -> MaxPool2d -> triu (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op1 = nn.MaxPool2d(kernel_size=3)

    def forward(self, x):
        x = torch.transpose(x, 1, 2)
        x = self.op1(x)
        x = torch.triu(x)
        return x


input_shape = (8, 32, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

