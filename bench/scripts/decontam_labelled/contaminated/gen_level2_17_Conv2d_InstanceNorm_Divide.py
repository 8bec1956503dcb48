# contaminated: level2/17_Conv2d_InstanceNorm_Divide, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a convolution, applies Instance Normalization, and divides by a constant.
    """

    def __init__(self, v1_, v3_, v2_, v0_):
        super(Model, self).__init__()
        self.a0_ = nn.Conv2d(v1_, v3_, v2_)
        self.a2_ = nn.InstanceNorm2d(v3_)
        self.a1_ = v0_

    def forward(self, v0_):
        v0_ = self.a0_(v0_)
        v0_ = self.a2_(v0_)
        v0_ = v0_ / self.a1_
        return v0_
batch_size = 16
in_channels = 64
out_channels = 16
height = width = 16
kernel_size = 3
divide_by = 2.0

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, divide_by]
