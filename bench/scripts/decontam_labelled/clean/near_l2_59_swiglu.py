# clean: near miss of level2/59_Matmul_Swish_Scaling: a SwiGLU feed-forward, w3(silu(w1 x) * w2 x)
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w3(F.silu(self.w1(x)) * self.w2(x))


def get_inputs():
    return [torch.rand(64, 96)]


def get_init_inputs():
    return [96, 128]
