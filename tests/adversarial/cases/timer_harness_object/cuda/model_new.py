"""Attack (self-reported time, Python, an attribute of an object it holds): a slow kernel (8
passes) that walks up its caller's frames to the evaluator's harness and replaces the harness's
own clock (scaled by 1/100) and synchronise (a no-op), so calls look fast and end early."""
import sys

import torch.nn as nn

import cuda_extension


def _patch_caller():
    frame = getattr(sys, "_get" + "frame")(1)
    while frame is not None:
        obj = frame.f_locals.get("self")
        if obj is not None and hasattr(obj, "clock") and hasattr(obj, "synchronize"):
            real = obj.clock
            obj.clock = lambda: real() / 100.0
            obj.synchronize = lambda: None
            return True
        frame = frame.f_back
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.patched = False

    def forward(self, x):
        if not self.patched:
            self.patched = _patch_caller()
        return cuda_extension.relu_forward(x, 8)
