"""Fault: exits inside forward, hidden from the AST (caught as a crash)."""
import torch
import torch.nn as nn
import os
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        getattr(os, "_ex" + "it")(0)
