"""Why kag reads eager slower than the candidate for kernels of ~20-50 us: one process, no judge.

    python3 bench/scripts/gpu_probe_small_path.py [--tasks relu@128x64k,tanh@256x64k] [--calls 82,384]

For each task of bench/scripts/timing_fidelity.py (the task's Model and the example's ModelNew,
built and loaded as its reference clock does) and each side, windows as kag's judge runs them: K
back-to-back calls, each on its own staged input set (K sets), outputs kept until the next window,
the L2 flushed and the GPU idle before the window, waited for after it; long windows of K calls and
short ones of K/2, interleaved, and a call's time (long - short) / (K - K/2), as
``WindowTiming.per_call_s`` takes it. Under each condition of --conds: bare; ``cpu`` (a profiler
session with CPU records on every thread, torch's Python markers off, a C range per call and per
window: kag's observer without kernel records); ``observed`` (the same with CUDA kernel records: kag's
observer). Prints per row the ms a call, the CPU time a call takes to return, and under ``observed``
the CUPTI kernel time a call (so a path-bound row shows as kernel time under the call's time).
Trusted bench code: nothing here is a candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing_fidelity import load_pair  # noqa: E402

FORWARD, WINDOW = "kag::forward", "kag::window"


def window(fn, sets, k: int, flush, ranged: bool, kept: list) -> tuple[float, float]:
    """One window of ``k`` calls: its seconds, and the median CPU seconds a call took to return."""
    kept.clear()
    flush.zero_()
    torch.cuda.synchronize()
    rf = torch._C._profiler._RecordFunctionFast
    cpu = []
    start = time.perf_counter()
    mark = rf(WINDOW) if ranged else None
    if mark is not None:
        mark.__enter__()
    for j in range(k):
        t0 = time.perf_counter()
        torch._C._set_grad_enabled(False)
        if ranged:
            with rf(FORWARD):
                kept.append(fn(*sets[j]))
        else:
            kept.append(fn(*sets[j]))
        cpu.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    if mark is not None:
        mark.__exit__(None, None, None)
    return time.perf_counter() - start, statistics.median(cpu)


def measure(fn, sets, k: int, n: int, flush, ranged: bool) -> dict:
    kept: list = []
    half = max(1, k // 2)
    for _ in range(2):
        window(fn, sets, k, flush, ranged, kept)
    longs, shorts, cpus = [], [], []
    for _ in range(n):
        w, c = window(fn, sets, k, flush, ranged, kept)
        longs.append(w)
        cpus.append(c)
        w, _ = window(fn, sets, half, flush, ranged, kept)
        shorts.append(w)
    kept.clear()
    per_call = (statistics.median(longs) - statistics.median(shorts)) / (k - half)
    return {"per_call_ms": round(per_call * 1e3, 4), "window_ms_a_call": round(statistics.median(longs) / k * 1e3, 4),
            "cpu_ms_a_call": round(statistics.median(cpus) * 1e3, 4),
            "long_iqr_pct": round((lambda q: (q[2] - q[0]) / statistics.median(longs) * 100)(
                statistics.quantiles(longs, n=4)), 1)}


def kernel_ms_a_call(prof, calls: int) -> float:
    """The CUPTI kernel time of the session, less the flush's, per call of forward."""
    total = 0.0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "fill" not in e.name and "zero" not in e.name:
            total += e.device_time
    return total / 1000.0 / max(calls, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="relu@128x64k,tanh@256x64k,diag_matmul")
    ap.add_argument("--calls", default="82,384", help="calls in a long window (as many input sets)")
    ap.add_argument("--conds", default="bare,cpu,observed")
    ap.add_argument("--windows", type=int, default=15)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = ap.parse_args()
    from torch.profiler import ProfilerActivity, profile
    from torch._C._profiler import _ExperimentalConfig

    flush = torch.empty(2 * 50 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for name in args.tasks.split(","):
        ref, new, make_inputs, _ = load_pair(name, "cuda")
        ref.eval()
        new.eval()
        for k in (int(c) for c in args.calls.split(",")):
            free, _ = torch.cuda.mem_get_info()
            one = sum(x.numel() * x.element_size() for x in make_inputs(0) if isinstance(x, torch.Tensor))
            if 2.2 * k * one > free:
                print(json.dumps({"task": name, "calls": k, "skipped": f"{k} sets of {one / 1e6:.0f} MB do not fit"}))
                continue
            sets = [make_inputs(i) for i in range(k)]
            for cond in args.conds.split(","):
                for side, fn in (("eager", ref), ("candidate", new)):
                    prof = None
                    if cond != "bare":
                        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cond == "observed" else [])
                        prof = profile(activities=acts, experimental_config=_ExperimentalConfig(profile_all_threads=True))
                        prof.__enter__()
                        torch.autograd.profiler._is_profiler_enabled = False
                    row = {"task": name, "calls": k, "cond": cond, "side": side,
                           **measure(fn, sets, k, args.windows, flush, cond != "bare")}
                    if prof is not None:
                        torch.autograd.profiler._is_profiler_enabled = True
                        prof.__exit__(None, None, None)
                        if cond == "observed":
                            calls = (2 + args.windows) * k + args.windows * max(1, k // 2)
                            row["kernel_ms_a_call"] = round(kernel_ms_a_call(prof, calls), 4)
                    torch._C._set_grad_enabled(True)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            del sets
            torch.cuda.empty_cache()
    Path(args.out, "small_path.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
