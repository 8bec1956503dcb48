# clean: rule composer, torch#5
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """mean -> Softmin -> MultiheadAttention -> cos -> Softmax (torch#5, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op1 = nn.Softmin(dim=-1)
        self.op2 = nn.MultiheadAttention(embed_dim=32, num_heads=8, dropout=0.0, batch_first=True)
        self.op4 = nn.Softmax(dim=-1)

    def forward(self, x):
        x = torch.mean(x, dim=-1)
        x = self.op1(x)
        x = self.op2(x, x, x)[0]
        x = torch.cos(x)
        x = self.op4(x)
        return x


input_shape = (8, 8, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

