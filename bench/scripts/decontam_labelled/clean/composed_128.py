# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LPPool2d -> AdaptiveMaxPool2d -> cummax -> PReLU (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.LPPool2d(norm_type=2, kernel_size=3)
        self.op1 = nn.AdaptiveMaxPool2d(output_size=4)
        self.op3 = nn.PReLU()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = torch.cummax(x, dim=1)[0]
        x = self.op3(x)
        return x


input_shape = (4, 16, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

