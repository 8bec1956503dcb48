# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """CircularPad2d -> Flatten -> matmul_self_t -> std (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.CircularPad2d(padding=1)
        self.op1 = nn.Flatten()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = torch.matmul(x, x.transpose(-1, -2))
        x = torch.std(x, dim=-1)
        return x


input_shape = (8, 16, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

