# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """CircularPad1d -> interpolate -> TransformerDecoderLayer (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.CircularPad1d(padding=1)
        self.op2 = nn.TransformerDecoderLayer(132, 4, 32, dropout=0.0, batch_first=True)

    def forward(self, x):
        x = self.op0(x)
        x = F.interpolate(x, scale_factor=2.0)
        x = self.op2(x, x)
        return x


input_shape = (2, 16, 64)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

