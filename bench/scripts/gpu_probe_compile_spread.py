"""Why torch.compile's baseline of a ~50 us task does not settle: one process, no kag judge.

    python3 bench/scripts/gpu_probe_compile_spread.py [--tasks level1/12,level2/14] [--windows 40]

For each task (KernelBench file under $KAG_KERNELBENCH) and each of eager and torch.compile (default
mode): windows of K back-to-back calls, each call on its own staged input set, the GPU idle before
the window and waited for after it (as kag's windows are), K chosen so a window holds ~2 ms. Each
under the conditions of --conds: bare; under a profiler session with CUDA kernel records (as kag's
observer runs every call); with a C RecordFunction range around each call; on every thread; with
the Python markers torch adds only while a profiler watches switched off (flagoff); CUDA only. Prints per condition
the median ms a call, the IQR in % of the median, the CPU time a call takes to return (no wait), and
dynamo's recompile counters. Trusted bench code: nothing here is a candidate.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch


def load(rel: str):
    root = Path(os.environ.get("KAG_KERNELBENCH", ".kb"))
    level, num = rel.split("/")
    path = next((root / level).glob(f"{num}_*.py"))
    spec = importlib.util.spec_from_file_location(f"task_{level}_{num}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return path.name, mod


def quart(xs: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(xs, n=4)
    med = statistics.median(xs)
    return med, (q[2] - q[0]) / med * 100


def profile_calls(fn, sets, top: int, calls: int = 200) -> str:
    """cProfile's ``top`` functions by own time over ``calls`` calls of ``fn`` on the staged sets."""
    import cProfile
    import io
    import pstats

    cp = cProfile.Profile()
    cp.enable()
    for j in range(calls):
        fn(*sets[j % len(sets)])
    cp.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(cp, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def windows(fn, sets, k: int, n: int, ranged: bool) -> tuple[list[float], list[float]]:
    per_call, cpu = [], []
    for w in range(n):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for j in range(k):
            if ranged:
                handle = torch._C._profiler._RecordFunctionFast("kag::forward")
                handle.__enter__()
            t0 = time.perf_counter()
            fn(*sets[j % len(sets)])
            cpu.append(time.perf_counter() - t0)
            if ranged:
                handle.__exit__(None, None, None)
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - start) / k)
    return per_call, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default="level1/12,level2/14")
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--conds", default="bare,profiler,profiler+range",
                        help="bare, profiler[+range], allthreads, flagoff, cudaonly (joined by +)")
    parser.add_argument("--cprofile", action="store_true", help="cProfile 200 compiled calls under a profiler")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = parser.parse_args()
    rows = []
    torch.backends.cuda.matmul.allow_tf32 = False
    for rel in args.tasks.split(","):
        name, mod = load(rel)
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs()).cuda().eval()
        sets = [[x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()] for _ in range(16)]
        compiled = torch.compile(model)
        with torch.no_grad():
            for fn in (model, compiled):
                for _ in range(5):
                    fn(*sets[0])
            torch.cuda.synchronize()
            start = time.perf_counter()
            for j in range(20):
                model(*sets[j % 16])
            torch.cuda.synchronize()
            one = (time.perf_counter() - start) / 20
            k = max(1, min(200, int(0.002 / max(one, 1e-6))))
            for cond in args.conds.split(","):
                prof = None
                if cond != "bare":
                    acts = [torch.profiler.ProfilerActivity.CUDA]
                    if not cond.startswith("cudaonly"):
                        acts.insert(0, torch.profiler.ProfilerActivity.CPU)
                    extra = {}
                    if "allthreads" in cond:
                        from torch._C._profiler import _ExperimentalConfig
                        extra["experimental_config"] = _ExperimentalConfig(profile_all_threads=True)
                    prof = torch.profiler.profile(activities=acts, **extra)
                    prof.__enter__()
                    if "flagoff" in cond:  # the Python markers torch adds only while a profiler watches
                        torch.autograd.profiler._is_profiler_enabled = False
                for label, fn in (("eager", model), ("compile", compiled)):
                    windows(fn, sets, k, 3, "range" in cond)  # warm-up windows
                    per_call, cpu = windows(fn, sets, k, args.windows, "range" in cond)
                    med, iqr = quart(per_call)
                    cmed, _ = quart(cpu)
                    row = {"task": name, "cond": cond, "side": label, "calls_per_window": k,
                           "median_ms": round(med * 1e3, 4), "iqr_pct": round(iqr, 1),
                           "min_ms": round(min(per_call) * 1e3, 4), "max_ms": round(max(per_call) * 1e3, 4),
                           "cpu_ms_a_call": round(cmed * 1e3, 4)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                if prof is not None:
                    torch.autograd.profiler._is_profiler_enabled = True
                    prof.__exit__(None, None, None)
        if args.cprofile:  # where a compiled call's time goes while a profiler watches
            with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                                     torch.profiler.ProfilerActivity.CUDA]):
                print(profile_calls(compiled, sets, 14))
        from torch._dynamo.utils import counters
        print(name, "dynamo counters:", {k: dict(v) for k, v in counters.items() if k in ("stats", "recompiles")},
              flush=True)
        torch._dynamo.reset()
    Path(args.out, "compile_spread.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    sys.exit(main())
