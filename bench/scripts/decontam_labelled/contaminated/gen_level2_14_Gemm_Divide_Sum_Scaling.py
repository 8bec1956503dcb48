# contaminated: level2/14_Gemm_Divide_Sum_Scaling, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a matrix multiplication, division, summation, and scaling.
    """

    def __init__(self, v1_, v0_, v2_):
        super(Model, self).__init__()
        self.a1_ = nn.Parameter(torch.randn(v0_, v1_))
        self.a0_ = v2_

    def forward(self, v0_):
        """
        Args:
            x (torch.Tensor): Input tensor of shape (batch_size, input_size).
        Returns:
            torch.Tensor: Output tensor of shape (batch_size, hidden_size).
        """
        v0_ = torch.matmul(v0_, self.a1_.T)
        v0_ = v0_ / 2
        v0_ = torch.sum(v0_, dim=1, keepdim=True)
        v0_ = v0_ * self.a0_
        return v0_
batch_size = 96
input_size = 96
hidden_size = 96
scaling_factor = 1.5

def get_inputs():
    return [torch.rand(batch_size, input_size)]

def get_init_inputs():
    return [input_size, hidden_size, scaling_factor]
