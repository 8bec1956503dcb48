"""Attack (spotting the watched calls by counting): runs its kernel for the first 5 calls (the
correctness checks) and PyTorch for every call after them."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 5:
            return torch.relu(x)
        return cuda_extension.relu_forward(x)
