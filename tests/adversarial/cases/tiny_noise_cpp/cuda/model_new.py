"""Attack (tiny outputs, noise on the right scale): hash noise between 0 and the reference's
largest value, unrelated to the input: within atol everywhere, never near-constant."""
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.tiny_forward(x, 2)
