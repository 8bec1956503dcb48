# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """MultiheadAttention -> matmul_self_t -> TransformerEncoderLayer (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.MultiheadAttention(embed_dim=32, num_heads=8, dropout=0.0, batch_first=True)
        self.op2 = nn.TransformerEncoderLayer(d_model=8, nhead=8, dropout=0.0, batch_first=True)

    def forward(self, x):
        x = self.op0(x, x, x)[0]
        x = torch.matmul(x, x.transpose(-1, -2))
        x = self.op2(x)
        return x


input_shape = (4, 8, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

