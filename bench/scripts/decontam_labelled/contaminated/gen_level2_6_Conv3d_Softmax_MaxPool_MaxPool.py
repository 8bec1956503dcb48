# contaminated: level2/6_Conv3d_Softmax_MaxPool_MaxPool, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a 3D convolution, applies Softmax, and performs two max pooling operations.
    """

    def __init__(self, v0_, v2_, v1_, v3_):
        super(Model, self).__init__()
        self.a0_ = nn.Conv3d(v0_, v2_, v1_)
        self.a1_ = nn.MaxPool3d(v3_)
        self.a2_ = nn.MaxPool3d(v3_)

    def forward(self, v0_):
        """
        Args:
            x: Input tensor of shape (batch_size, in_channels, depth, height, width)
        Returns:
            Output tensor of shape (batch_size, out_channels, depth', height', width') where depth', height', width' are the dimensions after pooling.
        """
        v0_ = self.a0_(v0_)
        v0_ = torch.softmax(v0_, dim=1)
        v0_ = self.a1_(v0_)
        v0_ = self.a2_(v0_)
        return v0_
batch_size = 16
in_channels = 3
out_channels = 16
depth, height, width = (16, 32, 32)
kernel_size = 3
pool_kernel_size = 2

def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_kernel_size]
