# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """AdaptiveMaxPool2d -> cumsum -> Upsample -> norm (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.AdaptiveMaxPool2d(output_size=4)
        self.op2 = nn.Upsample(scale_factor=2.0)

    def forward(self, x):
        x = self.op0(x)
        x = torch.cumsum(x, dim=1)
        x = self.op2(x)
        x = torch.norm(x, dim=-1)
        return x


input_shape = (2, 16, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

