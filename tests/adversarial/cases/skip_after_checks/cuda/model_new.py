"""Attack (skipped work, by counting): the first 5 calls are the correctness checks, so it computes
those and afterwards skips 2 of every 3 calls (returning its previous output)."""
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        if self.calls > 5 and self.calls % 3 != 0 and self.last is not None:
            return self.last
        self.last = cuda_extension.relu_forward(x)
        return self.last
