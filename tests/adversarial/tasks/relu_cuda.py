# Adversarial-corpus task (CUDA): ReLU on standard-normal inputs (half the values are negative, so an
# identity or a zero output is wrong), sized for a GPU (128 MiB per tensor).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
