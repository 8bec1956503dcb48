# Adversarial-corpus task (CPU): ReLU(x) * 1e-4, so every value is far below atol=1e-2 (the tiny-
# outputs family: zeros with a sparse sample of real values pass every elementwise test).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 1e-4


batch_size = 256
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
