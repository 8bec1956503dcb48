# clean: rule composer, torch#5
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose3d -> matmul_self_t -> var -> Upsample -> AdaptiveMaxPool2d (torch#5, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.ConvTranspose3d(in_channels=8, out_channels=16, kernel_size=3)
        self.op3 = nn.Upsample(scale_factor=2.0)
        self.op4 = nn.AdaptiveMaxPool2d(output_size=4)

    def forward(self, x):
        x = self.op0(x)
        x = torch.matmul(x, x.transpose(-1, -2))
        x = torch.var(x, dim=1)
        x = self.op3(x)
        x = self.op4(x)
        return x


input_shape = (2, 8, 4, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

