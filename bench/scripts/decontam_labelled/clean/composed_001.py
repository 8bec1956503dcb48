# clean: rule composer, torch#5
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose1d -> MultiheadAttention -> logsumexp -> matmul_self_t -> LogSoftmax (torch#5, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.ConvTranspose1d(in_channels=16, out_channels=8, kernel_size=3)
        self.op1 = nn.MultiheadAttention(embed_dim=66, num_heads=2, dropout=0.0, batch_first=True)
        self.op4 = nn.LogSoftmax(dim=-1)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x, x, x)[0]
        x = torch.logsumexp(x, dim=1)
        x = torch.matmul(x, x.transpose(-1, -2))
        x = self.op4(x)
        return x


input_shape = (4, 16, 64)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

