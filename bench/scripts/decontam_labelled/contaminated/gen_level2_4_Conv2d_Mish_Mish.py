# contaminated: level2/4_Conv2d_Mish_Mish, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a convolution, applies Mish, and another Mish.
    """

    def __init__(self, v0_, v2_, v1_):
        super(Model, self).__init__()
        self.a0_ = nn.Conv2d(v0_, v2_, v1_)

    def forward(self, v0_):
        v0_ = self.a0_(v0_)
        v0_ = torch.nn.functional.mish(v0_)
        v0_ = torch.nn.functional.mish(v0_)
        return v0_
batch_size = 64
in_channels = 64
out_channels = 16
height = width = 32
kernel_size = 3

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
