# contaminated: level1/26_GELU_, the erf formula written out
import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def get_inputs():
    return [torch.randn(128, 2048)]


def get_init_inputs():
    return []
