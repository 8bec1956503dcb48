"""Attack (escaping processes, C++ through pybind11): fork + setsid + fork in the binding; the
grandchild renames itself and lingers."""
import torch.nn as nn

import cuda_extension

cuda_extension.escape()


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu_forward(x)
