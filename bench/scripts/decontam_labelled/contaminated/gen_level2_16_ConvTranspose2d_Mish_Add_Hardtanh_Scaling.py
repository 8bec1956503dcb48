# contaminated: level2/16_ConvTranspose2d_Mish_Add_Hardtanh_Scaling, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a transposed convolution, applies Mish activation, adds a value, 
    applies Hardtanh activation, and scales the output.
    """

    def __init__(self, v1_, v3_, v2_, v7_, v5_, v4_, v0_, v6_):
        super(Model, self).__init__()
        self.a1_ = nn.ConvTranspose2d(v1_, v3_, v2_, v7_, v5_, v4_)
        self.a0_ = v0_
        self.a2_ = v6_

    def forward(self, v0_):
        v0_ = self.a1_(v0_)
        v0_ = torch.nn.functional.mish(v0_)
        v0_ = v0_ + self.a0_
        v0_ = torch.nn.functional.hardtanh(v0_, min_val=-1, max_val=1)
        v0_ = v0_ * self.a2_
        return v0_
batch_size = 16
in_channels = 64
out_channels = 64
height = width = 16
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
add_value = 0.5
scale = 2

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, add_value, scale]
