# contaminated: level1/1_Square_matrix_multiplication_, as an einsum
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.einsum("ik,kj->ij", A, B)


N = 256


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
