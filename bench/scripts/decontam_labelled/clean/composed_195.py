# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose2d -> cummax -> cumprod -> std (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.ConvTranspose2d(in_channels=8, out_channels=8, kernel_size=3)

    def forward(self, x):
        x = self.op0(x)
        x = torch.cummax(x, dim=1)[0]
        x = torch.cumprod(x, dim=-1)
        x = torch.std(x, dim=-1)
        return x


input_shape = (8, 8, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

