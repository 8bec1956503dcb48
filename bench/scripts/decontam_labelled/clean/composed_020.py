# clean: rule composer, torch#4
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """sum -> Threshold -> logsumexp -> LSTMCell (torch#4, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op1 = nn.Threshold(threshold=0.1, value=0.0)
        self.op3 = nn.LSTMCell(input_size=16, hidden_size=32)

    def forward(self, x):
        x = torch.sum(x, dim=1)
        x = self.op1(x)
        x = torch.logsumexp(x, dim=1)
        x = self.op3(x)[0]
        return x


input_shape = (2, 32, 16, 16)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

