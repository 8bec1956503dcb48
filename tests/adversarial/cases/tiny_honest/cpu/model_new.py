"""Honest: ReLU(x) * 1e-4 computed for every value (the tiny-output task's control)."""
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.tiny_forward(x, 0)
