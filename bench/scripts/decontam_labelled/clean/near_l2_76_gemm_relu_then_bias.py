# clean: near miss of level2/76_Gemm_Add_ReLU: the bias added after the ReLU (the same op multiset, another function)
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        return torch.relu(self.gemm(x)) + self.bias


def get_inputs():
    return [torch.rand(64, 96)]


def get_init_inputs():
    return [96, 80]
