# contaminated: level1/36_RMSNorm_, as F.rms_norm over the channels moved last
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        y = F.rms_norm(x.movedim(1, -1), (self.num_features,), eps=self.eps)
        return y.movedim(-1, 1)


def get_inputs():
    return [torch.rand(4, 16, 32, 32)]


def get_init_inputs():
    return [16]
