# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """MultiheadAttention -> matmul_self_t -> TransformerEncoder (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.MultiheadAttention(embed_dim=128, num_heads=8, dropout=0.0, batch_first=True)
        self.op2 = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 8, 64, dropout=0.0, batch_first=True), num_layers=2, enable_nested_tensor=False)

    def forward(self, x):
        x = self.op0(x, x, x)[0]
        x = torch.matmul(x, x.transpose(-1, -2))
        x = self.op2(x)
        return x


input_shape = (8, 8, 128)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

