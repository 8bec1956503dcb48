# Adversarial-corpus task (CPU): ReLU on standard-normal inputs (half the values are negative, so an
# identity or a zero output is wrong), small enough for eager PyTorch on 2 CPU cores.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 256
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
