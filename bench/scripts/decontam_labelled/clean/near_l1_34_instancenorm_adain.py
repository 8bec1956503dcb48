# clean: near miss of level1/34_InstanceNorm: AdaIN, x instance-normalised then given the style input's statistics
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, style):
        mean = style.mean(dim=(2, 3), keepdim=True)
        std = torch.sqrt(style.var(dim=(2, 3), keepdim=True, unbiased=False) + 1e-5)
        return F.instance_norm(x) * std + mean


def get_inputs():
    return [torch.rand(4, 16, 32, 32), torch.rand(4, 16, 32, 32)]


def get_init_inputs():
    return []
