# contaminated: level1/3_Batched_matrix_multiplication, as an einsum
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.einsum("bik,bkj->bij", A, B)


def get_inputs():
    return [torch.randn(8, 64, 96), torch.randn(8, 96, 32)]


def get_init_inputs():
    return []
