# Adversarial-corpus task (CUDA): ReLU on a tensor small enough that a call's input fits in the L2
# cache (8 MiB; an H100's L2 holds 50 MiB), for attacks that warm the cache for the next call of a window.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 1024
dim = 2048


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
