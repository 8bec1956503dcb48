"""Attack (tiny outputs, Python): zeros everywhere (an allowed fill) and the real values of the
first row only, written by the kernel into a view."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)
        cuda_extension.tiny_into(x[:1], y[:1])
        return y
