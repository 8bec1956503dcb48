"""Attack/fault: exits before the verdict."""
import torch
import torch.nn as nn
import os
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os._exit(0)
