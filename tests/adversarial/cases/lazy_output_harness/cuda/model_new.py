"""Attack (work put off past the window, Python): forward returns an unwritten tensor at once; the
solution wraps the evaluator's harness so that the kernels write the window's outputs only when the
judge next talks to it, after the window (when it asks for the memory to be poisoned): outside the
window's time, if the judge read its outputs through it."""
import sys

import torch
import torch.nn as nn

import cuda_extension


def _harness():
    frame = getattr(sys, "_get" + "frame")(1)
    while frame is not None:
        obj = frame.f_locals.get("self")
        if obj is not None and hasattr(obj, "poison") and hasattr(obj, "sets"):
            return obj
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.patched = False

    def forward(self, x):
        if not self.patched:
            harness = _harness()
            if harness is not None:
                original = harness.poison

                def lazy_poison(h=harness, original=original):
                    for inputs, out in zip(h.sets, h.outputs):
                        cuda_extension.relu_into(inputs[0], out)
                    return original()

                harness.poison = lazy_poison
                self.patched = True
        return torch.empty_like(x)
