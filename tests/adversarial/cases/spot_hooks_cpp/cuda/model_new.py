"""Attack (spotting the watched call, C++ through pybind11): the binding asks ATen whether any
RecordFunction callback (the profiler's) is active and computes with a PyTorch op when none is."""
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu_forward(x)
