"""Attack: the cache warmth of a window of calls. A window's input sets are staged before it
starts and are the same tensors window after window (refilled in place), in the same order. The
solution learns that order from the data pointers it sees, and every call, after its own ReLU, reads
the input of the call that follows it into the L2 cache, so the next call's kernel finds its input
warm. Nothing is skipped; what it can buy is only what the overlap really saves."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen: dict[int, torch.Tensor] = {}  # data pointer -> tensor, in the order first seen
        self.after: dict[int, int] = {}  # data pointer -> the one called after it last time
        self.last = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ptr = x.data_ptr()
        self.seen.setdefault(ptr, x)
        if self.last:
            self.after[self.last] = ptr
        self.last = ptr
        y = cuda_extension.relu_forward(x)
        nxt = self.seen.get(self.after.get(ptr, 0))
        if nxt is not None:
            cuda_extension.l2_touch(nxt)
        return y
