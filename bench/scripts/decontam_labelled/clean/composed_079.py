# clean: rule composer, torch#5
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """amax -> Mish -> ELU -> cummax -> matmul_self_t (torch#5, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op1 = nn.Mish()
        self.op2 = nn.ELU()

    def forward(self, x):
        x = torch.amax(x, dim=1)
        x = self.op1(x)
        x = self.op2(x)
        x = torch.cummax(x, dim=1)[0]
        x = torch.matmul(x, x.transpose(-1, -2))
        return x


input_shape = (8, 16, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

