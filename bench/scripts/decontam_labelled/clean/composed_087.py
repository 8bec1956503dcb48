# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """prod -> AvgPool1d -> Softsign (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op1 = nn.AvgPool1d(kernel_size=3)
        self.op2 = nn.Softsign()

    def forward(self, x):
        x = torch.prod(x, dim=1)
        x = self.op1(x)
        x = self.op2(x)
        return x


input_shape = (8, 16, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

