# contaminated: level2/8_Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a 3D convolution, divides by a constant, applies max pooling,
    global average pooling, adds a bias term, and sums along a specific dimension.
    """

    def __init__(self, v2_, v4_, v3_, v1_, v5_, v0_, v6_):
        super(Model, self).__init__()
        self.a1_ = nn.Conv3d(v2_, v4_, v3_)
        self.a2_ = v1_
        self.a4_ = nn.MaxPool3d(v5_)
        self.a3_ = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.a0_ = nn.Parameter(torch.randn(v0_))
        self.a5_ = v6_

    def forward(self, v0_):
        v0_ = self.a1_(v0_)
        v0_ = v0_ / self.a2_
        v0_ = self.a4_(v0_)
        v0_ = self.a3_(v0_)
        v0_ = v0_ + self.a0_
        v0_ = torch.sum(v0_, dim=self.a5_)
        return v0_
batch_size = 16
in_channels = 8
out_channels = 16
depth = 16
height = width = 64
kernel_size = (3, 3, 3)
divisor = 2.0
pool_size = (2, 2, 2)
bias_shape = (out_channels, 1, 1, 1)
sum_dim = 1

def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, divisor, pool_size, bias_shape, sum_dim]
