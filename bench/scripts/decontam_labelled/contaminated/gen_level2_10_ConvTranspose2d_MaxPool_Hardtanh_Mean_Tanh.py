# contaminated: level2/10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a transposed convolution, followed by max pooling, hardtanh activation, mean operation, and tanh activation.
    """

    def __init__(self, v2_, v6_, v3_, v8_, v7_, v4_, v5_, v1_, v0_):
        super(Model, self).__init__()
        self.a0_ = nn.ConvTranspose2d(v2_, v6_, v3_, stride=v8_, padding=v7_)
        self.a2_ = nn.MaxPool2d(kernel_size=v4_, stride=v5_)
        self.a1_ = nn.Hardtanh(min_val=v1_, max_val=v0_)

    def forward(self, v0_):
        v0_ = self.a0_(v0_)
        v0_ = self.a2_(v0_)
        v0_ = self.a1_(v0_)
        v0_ = torch.mean(v0_, dim=(2, 3), keepdim=True)
        v0_ = torch.tanh(v0_)
        return v0_
batch_size = 16
in_channels = 64
out_channels = 64
height = width = 32
kernel_size = 3
stride = 1
padding = 1
maxpool_kernel_size = 2
maxpool_stride = 2
hardtanh_min = -1
hardtanh_max = 1

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, maxpool_kernel_size, maxpool_stride, hardtanh_min, hardtanh_max]
