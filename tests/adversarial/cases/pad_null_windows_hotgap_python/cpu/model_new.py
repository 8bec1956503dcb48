"""Attack (the timing's base, through the gap, Python): the null windows are padded as in
pad_null_windows_python, and the harness's ``poison`` too: it spins (0.25 s as found) when the judge sizes the gap
after a window (1.3x the refill, the poison and the checks), and through every later gap, so this process
stays warm while the baseline runner, timed after gaps of the same length, went cold: its null windows
read 1.18-1.55 ms against 0.31-0.44 ms and lifted the bound on the padded base (found by an independent
attacker; twice the ReLU's work, 0.6x eager in truth, read 1.065x, reward 2, once in five runs on the
2-core VM: bench/results/2026-11-29-e977a9c-cpu). It does three ReLUs' work, as the plain pad does."""
import gc
import time

import torch.nn as nn

import cuda_extension

STATE = {"patched": False, "call_s": 0.0, "last_end": 0.0, "windowed": False, "polls": 0}
GAP_S = 0.12  # the poison the judge times to size every gap (0.25 s as found; shorter here for CI's time)


def _busy_until(end: float) -> None:
    while time.perf_counter() < end:
        pass


def _pad_null_windows() -> None:
    for obj in gc.get_objects():
        if type(obj).__name__ == "Harness":
            original = obj.null_call

            def padded(word, _original=original):
                end = time.perf_counter() + 0.9 * STATE["call_s"]
                while time.perf_counter() < end:
                    pass
                _original(word)
                STATE["last_end"] = time.perf_counter()
                STATE["windowed"] = True

            obj.null_call = padded
            poison = obj.poison

            def hot_poison(*args, _poison=poison):
                if not STATE["windowed"]:  # no window since the last poison: the judge is sizing the gap
                    _busy_until(time.perf_counter() + GAP_S)
                else:  # a gap: keep this CPU busy (and this process's cache warm) till the next window
                    _busy_until(STATE["last_end"] + 1.3 * GAP_S)
                STATE["windowed"] = False
                _poison(*args)

            obj.poison = hot_poison
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
        STATE["last_end"] = time.perf_counter()
        STATE["windowed"] = True
        return y
