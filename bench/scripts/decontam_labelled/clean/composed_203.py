# clean: rule composer, torch#5
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """MultiheadAttention -> BatchNorm1d -> AdaptiveAvgPool1d -> amax -> rsqrt (torch#5, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.MultiheadAttention(embed_dim=32, num_heads=8, dropout=0.0, batch_first=True)
        self.op1 = nn.BatchNorm1d(num_features=32)
        self.op2 = nn.AdaptiveAvgPool1d(output_size=4)

    def forward(self, x):
        x = self.op0(x, x, x)[0]
        x = self.op1(x)
        x = self.op2(x)
        x = torch.amax(x, dim=1)
        x = torch.rsqrt(torch.abs(x) + 1.0)
        return x


input_shape = (4, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

