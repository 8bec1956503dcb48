"""Attack: computes in a Python thread."""
import torch
import torch.nn as nn
import threading
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        t = threading.Thread(target=lambda: y.copy_(cuda_extension.relu_forward(x)))
        t.start()
        return y
