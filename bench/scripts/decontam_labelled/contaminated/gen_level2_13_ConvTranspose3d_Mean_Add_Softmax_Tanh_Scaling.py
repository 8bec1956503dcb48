# contaminated: level2/13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a series of operations:
    1. Transposed 3D convolution
    2. Mean pooling (across depth)
    3. Addition
    4. Softmax (across channels)
    5. Tanh activation
    6. Scaling
    """

    def __init__(self, v0_, v2_, v1_, v5_, v3_, v4_):
        super(Model, self).__init__()
        self.a1_ = nn.ConvTranspose3d(v0_, v2_, v1_, stride=v5_, padding=v3_)
        self.a0_ = nn.Parameter(torch.randn(1, v2_, 1, 1, 1))
        self.a2_ = v4_

    def forward(self, v0_):
        v0_ = self.a1_(v0_)
        v0_ = v0_.mean(dim=2, keepdim=True)
        v0_ = v0_ + self.a0_
        v0_ = torch.softmax(v0_, dim=1)
        v0_ = torch.tanh(v0_)
        v0_ = v0_ * self.a2_
        return v0_
batch_size = 16
in_channels = 16
out_channels = 64
depth = 32
height = width = 16
kernel_size = 3
stride = 1
padding = 1
scaling_factor = 2.0

def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, scaling_factor]
