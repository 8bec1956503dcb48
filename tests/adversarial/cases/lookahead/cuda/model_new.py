"""Attack: a window's input sets are all staged before it starts. At the first call of a window,
find the harness (gc), compute every staged set's output at once, and hand the precomputed outputs
to the later calls, which launch nothing: the window is credited a batch's throughput."""
import gc

import torch
import torch.nn as nn

import cuda_extension


def _harness():
    for obj in gc.get_objects():
        if type(obj).__name__ == "Harness" and hasattr(obj, "sets"):
            return obj
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ahead = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.data_ptr() in self.ahead:
            return self.ahead.pop(x.data_ptr())
        harness = _harness()
        if harness is not None:
            for staged in harness.sets[1:]:
                self.ahead[staged[0].data_ptr()] = cuda_extension.relu_forward(staged[0])
        return cuda_extension.relu_forward(x)
