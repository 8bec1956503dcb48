# clean: rule composer, torch#3
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """TransformerDecoder -> cumsum -> LSTM (torch#3, composed by kag data rule)"""

    def __init__(self):
        super().__init__()
        self.op0 = nn.TransformerDecoder(nn.TransformerDecoderLayer(32, 8, 64, dropout=0.0, batch_first=True), num_layers=2)
        self.op2 = nn.LSTM(32, 64, batch_first=True)

    def forward(self, x):
        x = self.op0(x, x)
        x = torch.cumsum(x, dim=1)
        x = self.op2(x)[0]
        return x


input_shape = (4, 32, 32)


def get_inputs():
    return [torch.rand(*input_shape)]


def get_init_inputs():
    return []

