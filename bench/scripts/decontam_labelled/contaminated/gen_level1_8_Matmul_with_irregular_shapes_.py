# contaminated: level1/8_Matmul_with_irregular_shapes_, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a single matrix multiplication (C = A * B) with irregular shapes
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, v0_: torch.Tensor, v1_: torch.Tensor) -> torch.Tensor:
        """
        Performs matrix multiplication of A and B.

        Args:
            A: Input tensor with shape (M, K).
            B: Input tensor with shape (K, N).

        Returns:
            C: Output tensor with shape (M, N).
        """
        return torch.matmul(v0_, v1_)
M = 96
K = 96
N = 96

def get_inputs():
    A = torch.rand(M, K)
    B = torch.rand(K, N)
    return [A, B]

def get_init_inputs():
    return []
