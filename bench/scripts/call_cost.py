"""Where a small kernel's call goes in the candidate's process, piece by piece, for a real solution.

The judge reads ``forward`` 19-24 us and ``harness`` 9-11 us a call for diag_matmul on an H200 (a
34 us kernel: the call is bound by its CPU path, bench/results/2026-11-29-4bc9cc9-h200). This script
takes one task of bench/scripts/timing_fidelity.py (the task's Model and the example's ModelNew),
and times on ``perf_counter`` each piece's ``loop`` (calls back to back, one synchronise at the end: the
GPU's time where the path is shorter) and its ``cpu`` time (runs of 100 calls to their last return,
before any wait: the path's own time):

- ``forward``: ``fn(*inputs)`` alone (eager and the candidate), bare, under the observer's profiler
  session (CPU records on every thread, kernel records), and under a CUDA-only session;
- ``call``: what the harness does around a call (kag.core.eval.candidate.candidate ``call``: grad
  off, the C range, forward, ``plain_output``, the GPU output's description, the answer's word);
- with ``--seccomp`` the process loads kag's allow-list filter (as the candidate has it) once the
  solution is built and loaded, so a second run shows what the filter adds to a call.

    python bench/scripts/call_cost.py [--task diag_matmul] [--calls 2000] [--seccomp] [--out DIR]

Trusted bench code; prints one JSON object per row and writes call_cost[_seccomp].json.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
WORD = struct.Struct("<Q")


def per_call_us(fn, calls: int, sync) -> float:
    for _ in range(50):
        fn()
    sync()
    best = []
    for _ in range(3):  # the best of three runs: the rows compare pieces, not a loaded host
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best.append((time.perf_counter() - t0) / calls * 1e6)
    return min(best)


def cpu_us(fn, sync, calls: int = 100, runs: int = 30) -> float:
    """The CPU time a call takes to return, in runs of ``calls`` (fewer than the launch queue holds,
    so no launch waits for the GPU), the GPU idle before each run: the median run's per call."""
    import statistics

    times = []
    for _ in range(runs):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    sync()
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="diag_matmul")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--seccomp", action="store_true", help="load kag's allow-list filter first")
    ap.add_argument("--out", default=os.environ.get("OUT", ""))
    ap.add_argument("--backend", default="cuda", help="cpu: a smoke run of this script without a GPU")
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kag.core.eval.candidate.candidate import plain_output
    from kag.core.eval.candidate.checks import iter_tensors
    from kag.core.eval.candidate.gpu_outputs import OutputDescriber
    from kag.core.eval.candidate.profiler_events import all_threads
    from timing_fidelity import load_pair

    ref, new, make_inputs, device = load_pair(args.task, args.backend)
    inputs = make_inputs(0)
    if args.seccomp:  # after the build (the compiler forks) and CUDA's start; a filter costs per call as loaded
        from kag.core.trust.seccomp_allow import apply_allow_list

        apply_allow_list(no_exec=True, no_fork=True, own_pid=os.getpid())
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rf = torch._C._profiler._RecordFunctionFast
    set_grad = torch._C._set_grad_enabled
    bell = mmap.mmap(-1, 16)
    rows: list[dict] = []

    def as_call(fn):
        describer = OutputDescriber()
        outputs: list = []
        clock = time.perf_counter

        def call():  # the harness's work around one call, as ``CandidateProcess.call`` does it
            if len(outputs) > 64:
                outputs.clear()
                describer.clear()
            entered = clock()
            set_grad(False)
            with rf("kag::forward"):
                started = clock()
                out = fn(*inputs)
                returned = clock()
                outputs.append(plain_output(out, device == "cpu"))
            if device == "cuda":
                describer.add(iter_tensors(outputs[-1]))
            WORD.pack_into(bell, 8, 1)
            _ = (returned - started, clock() - entered)
        return call

    def measure(cond: str, side: str, piece: str, fn) -> None:
        row = {"task": args.task, "seccomp": args.seccomp, "cond": cond, "side": side, "piece": piece,
               "loop_us_a_call": round(per_call_us(fn, args.calls, sync), 2),
               "cpu_us_a_call": round(cpu_us(fn, sync), 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)

    set_grad(False)
    sides = (("eager", ref), ("candidate", new))
    conds = (("bare", None, None), ("observer", [ProfilerActivity.CPU, ProfilerActivity.CUDA], all_threads()),
             ("cpu records only", [ProfilerActivity.CPU], all_threads()),
             ("kernel records only", [ProfilerActivity.CUDA], None))
    if device == "cpu":
        conds = conds[:1] + (("observer", [ProfilerActivity.CPU], all_threads()),)
    for cond, acts, cfg in conds:
        prof = None
        if acts is not None:
            prof = profile(activities=acts, experimental_config=cfg)
            prof.__enter__()
            torch.autograd.profiler._is_profiler_enabled = False  # the observer's python_markers(False)
        for side, model in sides:
            measure(cond, side, "forward", lambda m=model: m(*inputs))
            measure(cond, side, "call", as_call(model))
        if prof is not None:
            torch.autograd.profiler._is_profiler_enabled = True
            prof.__exit__(None, None, None)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        name = "call_cost_seccomp.json" if args.seccomp else "call_cost.json"
        Path(args.out, name).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
