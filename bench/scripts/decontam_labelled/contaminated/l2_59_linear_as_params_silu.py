# contaminated: level2/59_Matmul_Swish_Scaling, nn.Linear as its weights (x @ w.t() + b) and Swish as F.silu
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n_in, n_out, s):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n_out, n_in))
        self.b = nn.Parameter(torch.randn(n_out))
        self.s = s

    def forward(self, x):
        return F.silu(x @ self.w.t() + self.b) * self.s


def get_inputs():
    return [torch.rand(64, 512)]


def get_init_inputs():
    return [512, 256, 2.0]
