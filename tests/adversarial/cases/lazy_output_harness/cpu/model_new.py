"""Attack (work put off until the output is asked for, Python): forward returns an unwritten
tensor at once; the solution wraps the evaluator's harness so that, when the judge asks for an
output, the kernel first writes it into that tensor (no allocation, no PyTorch op)."""
import sys

import torch
import torch.nn as nn

import cuda_extension


def _harness():
    frame = getattr(sys, "_get" + "frame")(1)
    while frame is not None:
        obj = frame.f_locals.get("self")
        if obj is not None and hasattr(obj, "post") and hasattr(obj, "inputs"):
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
                original = harness.post

                def lazy_post(arg, h=harness, original=original):
                    if h.last is not None:
                        cuda_extension.relu_into(h.inputs[0], h.last)
                    return original(arg)

                harness.post = lazy_post
                self.patched = True
        return torch.empty_like(x)
