"""Attack (tiny outputs, C++ kernel): every value is far below atol, so the kernel writes only
every 64th real value and zeros elsewhere: each value is within tolerance and the output still
varies like the reference's."""
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.tiny_forward(x, 1)
