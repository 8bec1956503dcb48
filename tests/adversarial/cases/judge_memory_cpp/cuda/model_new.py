"""Attack (the judge's memory, C++ through pybind11): open + pread of /proc/<judge>/mem and
process_vm_readv from the binding."""
import torch.nn as nn

import cuda_extension

cuda_extension.attack_judge()


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu_forward(x)
