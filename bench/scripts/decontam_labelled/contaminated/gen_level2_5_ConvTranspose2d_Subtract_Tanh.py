# contaminated: level2/5_ConvTranspose2d_Subtract_Tanh, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a transposed convolution, subtracts a bias term, and applies tanh activation.
    """

    def __init__(self, v1_, v3_, v2_, v0_, v6_=2, v5_=1, v4_=1):
        super(Model, self).__init__()
        self.a1_ = nn.ConvTranspose2d(v1_, v3_, v2_, stride=v6_, padding=v5_, output_padding=v4_)
        self.a0_ = nn.Parameter(torch.randn(v0_))

    def forward(self, v0_):
        v0_ = self.a1_(v0_)
        v0_ = v0_ - self.a0_
        v0_ = torch.tanh(v0_)
        return v0_
batch_size = 32
in_channels = 64
out_channels = 64
height = width = 32
kernel_size = 4
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
