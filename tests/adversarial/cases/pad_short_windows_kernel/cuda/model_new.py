"""Attack (the timing's base on a GPU, its own kernel): as pad_short_windows_python, but the padding is
GPU time: at the end of a short window (fewer calls than the most seen) the solution launches a kernel
of its own that spins for three quarters of the window so far, which the judge's wait for an idle GPU
would count. It does twice the work of an honest ReLU."""
import gc

import torch
import torch.nn as nn

import cuda_extension

STATE = {"patched": False, "most": 0}


def _pad_short_ends() -> None:
    for obj in gc.get_objects():
        if type(obj).__name__ == "Harness":
            original = obj.end

            def padded(word, _original=original, _harness=obj):
                calls = len(_harness.outputs)
                STATE["most"] = max(STATE["most"], calls)
                if 0 < calls < STATE["most"]:
                    torch.cuda.synchronize()
                    took = _harness.clock() - _harness.window_start
                    cuda_extension.spin_ns(int(0.75 * took * 1e9))
                _original(word)

            obj.end = padded
            STATE["patched"] = True
            return


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not STATE["patched"]:
            _pad_short_ends()
        return cuda_extension.relu_forward(cuda_extension.relu_forward(x))
