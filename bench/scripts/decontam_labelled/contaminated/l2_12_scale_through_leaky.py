# contaminated: level2/12_Gemm_Multiply_LeakyReLU, the positive multiplier moved through the LeakyReLU
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.act = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        return self.act(self.gemm(x)) * self.multiplier


def get_inputs():
    return [torch.rand(64, 512)]


def get_init_inputs():
    return [512, 256, 2.0, 0.1]
