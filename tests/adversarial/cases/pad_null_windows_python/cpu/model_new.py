"""Attack (the timing's base, Python): on the CPU a call's time is its window less the median null
window (a call of nothing, rung as its own op). The solution finds the harness in its process and pads
every null window with most of a call's time, so its calls read far faster than they run. It does
three times the work of an honest ReLU, so its real speed is well under eager's (with twice the work, a
ReLU whose second pass finds its input in cache, it ran at 0.55-0.85x eager on the 2-core VM: too close to
1 for the bound's own noise, which is what the attack may keep)."""
import gc
import time

import torch.nn as nn

import cuda_extension

STATE = {"patched": False, "call_s": 0.0}


def _pad_null_windows() -> None:
    for obj in gc.get_objects():
        if type(obj).__name__ == "Harness":
            original = obj.null_call

            def padded(word, _original=original):
                end = time.perf_counter() + 0.9 * STATE["call_s"]
                while time.perf_counter() < end:
                    pass
                _original(word)

            obj.null_call = padded
            STATE["patched"] = True
            return


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not STATE["patched"]:
            _pad_null_windows()
        start = time.perf_counter()
        y = cuda_extension.relu_forward(cuda_extension.relu_forward(cuda_extension.relu_forward(x)))
        took = time.perf_counter() - start
        STATE["call_s"] = took if not STATE["call_s"] else 0.9 * STATE["call_s"] + 0.1 * took
        return y
