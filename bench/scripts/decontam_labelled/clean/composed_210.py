# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LPPool1d -> cumsum -> mean (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.LPPool1d(norm_type=2, kernel_size=3)

    def forward(self, x):
        x = self.op0(x)
        x = torch.cumsum(x, dim=1)
        x = torch.mean(x, dim=-1)
        return x


input_shape = (4, 8, 64)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

