# contaminated: level2/9_Matmul_Subtract_Multiply_ReLU, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a matrix multiplication, subtraction, multiplication, and ReLU activation.
    """

    def __init__(self, v0_, v2_, v3_, v1_):
        super(Model, self).__init__()
        self.a0_ = nn.Linear(v0_, v2_)
        self.a2_ = v3_
        self.a1_ = v1_

    def forward(self, v0_):
        v0_ = self.a0_(v0_)
        v0_ = v0_ - self.a2_
        v0_ = v0_ * self.a1_
        v0_ = torch.relu(v0_)
        return v0_
batch_size = 96
in_features = 96
out_features = 96
subtract_value = 2.0
multiply_value = 1.5

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, subtract_value, multiply_value]
