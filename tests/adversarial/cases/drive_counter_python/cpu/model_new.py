"""Attack (the operator counter driven by the solution, Python): forward finds kag's operator counter
among its process's mappings, ends its own call through the library's entry point, falls back to PyTorch
while the counter is outside a call, and begins the call again, so that the fallback's operators would
count as the harness's own."""
import ctypes

import torch
import torch.nn as nn


def _counter():
    with open("/proc/self/maps") as fh:
        for line in fh:
            if "kag-op-counter" in line:
                return ctypes.CDLL(line.split(None, 5)[5].strip())  # the loaded one: found by its name
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = None

    def forward(self, x):
        if self.lib is None:
            self.lib = _counter() or False
            print("COUNTER-DRIVEN" if self.lib else "NO-COUNTER", flush=True)
        if self.lib:
            self.lib.kag_call_end()
        y = getattr(torch, "re" + "lu")(x)
        if self.lib:
            self.lib.kag_call_begin(ctypes.c_uint64(0), 0)
        return y
