# contaminated: level2/12_Gemm_Multiply_LeakyReLU, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a Gemm, multiplies the result, and applies LeakyReLU.
    """

    def __init__(self, v0_, v3_, v1_, v2_):
        super(Model, self).__init__()
        self.a0_ = nn.Linear(v0_, v3_)
        self.a2_ = v1_
        self.a1_ = nn.LeakyReLU(v2_)

    def forward(self, v0_):
        v0_ = self.a0_(v0_)
        v0_ = v0_ * self.a2_
        v0_ = self.a1_(v0_)
        return v0_
batch_size = 96
in_features = 96
out_features = 96
multiplier = 2.0
negative_slope = 0.1

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, multiplier, negative_slope]
