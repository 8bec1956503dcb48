# clean: rule composer, torch#5
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ZeroPad1d -> ReplicationPad1d -> MultiheadAttention -> sqrt -> GLU (torch#5, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.ZeroPad1d(padding=1)
        self.op1 = nn.ReplicationPad1d(padding=1)
        self.op2 = nn.MultiheadAttention(embed_dim=132, num_heads=4, dropout=0.0, batch_first=True)
        self.op4 = nn.GLU()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x, x, x)[0]
        x = torch.sqrt(torch.abs(x))
        x = self.op4(x)
        return x


input_shape = (2, 16, 128)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

