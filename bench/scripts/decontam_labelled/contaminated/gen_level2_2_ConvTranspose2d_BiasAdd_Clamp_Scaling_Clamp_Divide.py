# contaminated: level2/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a transposed convolution, adds a bias term, clamps, scales, clamps, and divides.
    """

    def __init__(self, v1_, v3_, v2_, v7_, v5_, v4_, v0_, v6_):
        super(Model, self).__init__()
        self.a1_ = nn.ConvTranspose2d(v1_, v3_, v2_, stride=v7_, padding=v5_, output_padding=v4_)
        self.a0_ = nn.Parameter(torch.randn(v0_))
        self.a2_ = v6_

    def forward(self, v0_):
        v0_ = self.a1_(v0_)
        v0_ = v0_ + self.a0_
        v0_ = torch.clamp(v0_, min=0.0, max=1.0)
        v0_ = v0_ * self.a2_
        v0_ = torch.clamp(v0_, min=0.0, max=1.0)
        v0_ = v0_ / self.a2_
        return v0_
batch_size = 16
in_channels = 64
out_channels = 64
height = width = 16
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
bias_shape = (out_channels, 1, 1)
scaling_factor = 2.0

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape, scaling_factor]
