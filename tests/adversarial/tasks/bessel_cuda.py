# Adversarial-corpus task (CUDA): the Bessel function J0, an op PyTorch compiles at run time with NVRTC
# (the "jiterator"), not one of its prebuilt kernels: the door the fatbin wall alone left open.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x)


batch_size = 1024
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim) * 10]


def get_init_inputs():
    return []
