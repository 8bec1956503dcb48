"""What a call's CPU path costs in the judge's harness, piece by piece (a diagnostic of how
small kernels are timed).

One process, a 64 x 65536 ReLU (13 us of GPU work on an H100) called back to back, the time per
call on ``perf_counter`` with one synchronise at the end, for the pieces the harness adds around a
call: ``torch.no_grad``, the observer's ``record_function`` range, the profiler session (CPU
activity, CUDA activity, every thread), and a forked partner ringing each call through a shared
word as the judge does. Where the per-call time is over the kernel's, the path, not the GPU, sets
what a window measures.

    python bench/scripts/path_cost.py [--device cuda|cpu] [--calls 2000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import struct
import time
from pathlib import Path

WORD = struct.Struct("<Q")


def per_call_us(fn, calls: int, sync) -> float:
    for _ in range(50):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", default=os.environ.get("OUT", ""))
    args = ap.parse_args()

    import torch
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    from kag.core.eval.candidate.profiler_events import all_threads

    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    x = torch.randn(64, 65536, device=dev)
    rows: dict[str, float] = {}

    def bare():
        torch.relu(x)

    def harness():
        with torch.no_grad(), record_function("kag::forward"):
            torch.relu(x)

    def measure(label: str, fn) -> None:
        rows[label] = round(per_call_us(fn, args.calls, sync), 2)
        print(f"{label}: {rows[label]} us a call", flush=True)

    measure("bare relu", bare)
    measure("no_grad + record_function", harness)
    cpu = [ProfilerActivity.CPU]
    cuda = [ProfilerActivity.CUDA] if dev == "cuda" else []
    for label, acts, cfg in (("profiler CPU", cpu, None), ("profiler CPU+CUDA", cpu + cuda, None),
                             ("profiler CPU+CUDA, all threads", cpu + cuda, all_threads()),
                             ("profiler CUDA only", cuda or cpu, None)):
        with profile(activities=acts, experimental_config=cfg):
            measure(f"{label}: bare relu", bare)
            measure(f"{label}: no_grad + record_function", harness)

    # the doorbell: a forked partner rings each call through a shared word and waits for its echo
    bell = mmap.mmap(-1, 16)
    for label, observed in (("bell round trip, no profiler", False), ("bell round trip, profiler as the harness", True)):
        WORD.pack_into(bell, 0, 0)
        WORD.pack_into(bell, 8, 0)
        pid = os.fork()
        if pid == 0:  # the partner (the judge's side): ring, wait for the echo
            n = 0
            while WORD.unpack_from(bell, 8)[0] != 1 << 62:
                pass
            t0 = time.perf_counter()
            for n in range(1, args.calls + 1):
                WORD.pack_into(bell, 0, n)
                while WORD.unpack_from(bell, 8)[0] != n:
                    pass
            WORD.pack_into(bell, 0, 1 << 62)
            os._exit(0)
        prof = profile(activities=cpu + cuda, experimental_config=all_threads()) if observed else None
        if prof is not None:
            prof.__enter__()
        WORD.pack_into(bell, 8, 1 << 62)
        t0 = time.perf_counter()
        last = 0
        while True:
            word = WORD.unpack_from(bell, 0)[0]
            if word == 1 << 62:
                break
            if word == last or word == 0:
                continue
            last = word
            harness()
            WORD.pack_into(bell, 8, word)
        sync()
        rows[label] = round((time.perf_counter() - t0) / args.calls * 1e6, 2)
        if prof is not None:
            prof.__exit__(None, None, None)
        os.waitpid(pid, 0)
        print(f"{label}: {rows[label]} us a call", flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "path_cost.json").write_text(json.dumps({"device": dev, "calls": args.calls, "us": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
