"""Attack/fault: spawns a child process from forward."""
import torch
import torch.nn as nn
import subprocess
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        subprocess.Popen(["sleep", "30"])
        return cuda_extension.relu_forward(x)
