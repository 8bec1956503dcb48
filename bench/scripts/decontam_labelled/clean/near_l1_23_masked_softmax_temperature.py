# clean: near miss of level1/23_Softmax: a causal mask and a temperature before the softmax
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, scores):
        n = scores.shape[-1]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=scores.device), diagonal=1)
        scores = (scores / self.temperature).masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1)


def get_inputs():
    return [torch.rand(4, 8, 32, 32)]


def get_init_inputs():
    return [0.7]
