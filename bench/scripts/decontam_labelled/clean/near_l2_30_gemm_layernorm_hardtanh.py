# clean: near miss of level2/30_Gemm_GroupNorm_Hardtanh: a LayerNorm over all features in place of the GroupNorm (the same ops once decomposed, another function)
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, hardtanh_min, hardtanh_max):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        self.lo = hardtanh_min
        self.hi = hardtanh_max

    def forward(self, x):
        return F.hardtanh(self.norm(self.gemm(x)), self.lo, self.hi)


def get_inputs():
    return [torch.rand(64, 96)]


def get_init_inputs():
    return [96, 128, -2.0, 2.0]
