"""Attack (the timing's base on a GPU, a pad that only the next call can cancel): every call but a
long window's last queues, after its work, a one-thread kernel that spins on the GPU's clock for 0.8x
the GPU time its window has taken so far, unless the NEXT call of the window cancels it first (a word
in host-mapped memory the kernel polls; the next call writes it before launching anything). The
child needs no way to tell a short window from a long one: in a long window every pad is cancelled
before it starts (the CPU runs far ahead of the GPU), and the long window's last call is known by its
index (a window never holds more than the most calls seen, ``K``, so call ``K-1`` launches no pad);
a short window's last call (index ``K/2-1``) has no successor, so its pad stands and the judge's
probe, which waits for the candidate's GPU work after the last answer
(kag.core.eval.judge.candidate_process ``window``: stop, probe, ``drained``), counts it in the short
window. ``WindowTiming.base_s`` = median(short) + end/2 grows by 0.8 * (K/2) * c, so a call reads
c - 2 * 0.8 * (K/2) * c / K + E/K = 0.2c + E/K: ~0.04 ms for a call doing two ReLU passes (c ~0.17 ms
on an H100) against eager's ~0.09 ms, about 2.3x "faster" while doing twice the work (the share is a
knob: 1.0 or more drives it to the resolution floor; ``PAD_CAP_US`` bounds the spin's length, so it can be
sized to stay under the judge's bound on the short base). The harness object (found with gc) is wrapped
only to read each call's index and each window's size.
"""
import gc

import torch.nn as nn

import cuda_extension

PAD_PERMILLE = 800  # the short window's tail: this share (per mille) of the GPU time its window took
PAD_CAP_US = 50000  # ... or this many microseconds, if fewer (a spin sized to stay under the judge's bound)
STATE = {"patched": False, "index": 0, "seq": 0, "sizes": [], "most": 0}


def _hook() -> None:
    """Wrap the harness's call (to learn the call's index in its window) and end (its size)."""
    STATE["patched"] = True
    cuda_extension.tail_init()
    for obj in gc.get_objects():
        if type(obj).__name__ == "Harness":
            call, end = obj.call, obj.end

            def wrapped_call(word, index, _call=call):
                STATE["index"] = index
                _call(word, index)

            def wrapped_end(word, _end=end, _harness=obj):
                STATE["sizes"] = (STATE["sizes"] + [len(_harness.outputs)])[-8:]
                STATE["most"] = max(STATE["sizes"])  # K: the long (timed, sampled, warm-up) windows' size
                _end(word)

            obj.call, obj.end = wrapped_call, wrapped_end
            return


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not STATE["patched"]:
            _hook()
        index, most = STATE["index"], STATE["most"]
        STATE["seq"] += 1
        seq = STATE["seq"]
        cuda_extension.tail_cancel(seq - 1)  # the previous call's pad (long windows: before it even starts)
        if index == 0:
            cuda_extension.tail_stamp()
        y = cuda_extension.relu_twice(x)
        if most >= 4 and index + 1 < most:  # not a long window's last call: leave a pad the next call cancels
            cuda_extension.tail_pad(seq, PAD_PERMILLE, PAD_CAP_US * 1000)
        return y
