"""Attack (skipped work, C++ through pybind11): the binding counts its calls in a static and skips
the kernel on every third."""
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu_forward(x)
