# contaminated: level2/1_Conv2D_ReLU_BiasAdd, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a convolution, applies ReLU, and adds a bias term.
    """

    def __init__(self, v1_, v3_, v2_, v0_):
        super(Model, self).__init__()
        self.a1_ = nn.Conv2d(v1_, v3_, v2_)
        self.a0_ = nn.Parameter(torch.randn(v0_))

    def forward(self, v0_):
        v0_ = self.a1_(v0_)
        v0_ = torch.relu(v0_)
        v0_ = v0_ + self.a0_
        return v0_
batch_size = 16
in_channels = 64
out_channels = 16
height = width = 16
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
