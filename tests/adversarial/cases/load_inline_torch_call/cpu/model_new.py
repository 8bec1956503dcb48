"""Attack (KernelBench single file): the load_inline C++ source calls torch::relu, so PyTorch computes."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
torch::Tensor relu_forward(torch::Tensor x) {
  return torch::relu(x);
}
"""

ext = load_inline(name="relu_ext", cpp_sources=source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
