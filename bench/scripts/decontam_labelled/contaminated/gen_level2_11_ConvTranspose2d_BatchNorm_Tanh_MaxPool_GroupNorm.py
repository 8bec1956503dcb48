# contaminated: level2/11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a transposed convolution, batch normalization, tanh activation, max pooling, and group normalization.
    """

    def __init__(self, v1_, v4_, v2_, v6_, v5_, v0_, v3_):
        super(Model, self).__init__()
        self.a1_ = nn.ConvTranspose2d(v1_, v4_, v2_, stride=v6_, padding=v5_)
        self.a0_ = nn.BatchNorm2d(v4_)
        self.a4_ = nn.Tanh()
        self.a3_ = nn.MaxPool2d(kernel_size=2, stride=2)
        self.a2_ = nn.GroupNorm(num_groups=v3_, num_channels=v4_)

    def forward(self, v0_):
        v0_ = self.a1_(v0_)
        v0_ = self.a0_(v0_)
        v0_ = self.a4_(v0_)
        v0_ = self.a3_(v0_)
        v0_ = self.a2_(v0_)
        return v0_
batch_size = 64
in_channels = 64
out_channels = 16
height = width = 96
kernel_size = 5
stride = 1
padding = 1
groups = 8
num_groups = 8
height, width = (32, 32)

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, groups, num_groups]
