"""Where a second process's forward loses time after the judge used the GPU (the
judge's timing fidelity).

A judge-like parent and a candidate-like child (CUDA IPC for the inputs, a pipe for the doorbell)
on one GPU, with no MPS: each process has its own context, so the GPU switches between them.
For one memory-bound kernel (sigmoid) at a few sizes, the child times ``forward + synchronise``
on its own clock and the kernel with CUDA events, after the parent did, between calls:

  idle      nothing on the GPU
  tiny      one tiny kernel + synchronise (a context switch, no memory traffic)
  flush     an L2 flush (writes 100 MB) + synchronise
  refill    refill the inputs in place + flush + synchronise (what the judge does today)
  refill+w  as refill, and the child runs a one-element kernel + synchronise before its clock
  refill+t  as refill, and the child reads one element of each input page first (TLB warm-up)

and the same kernel timed in the parent alone (flush before each call). Prints one table.

    python bench/scripts/gpu_probe_context_switch.py [--iters 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.multiprocessing as mp

SIZES = [(128, 65536), (512, 32768), (512, 131072), (1024, 262144)]
MODES = ["idle", "tiny", "flush", "refill", "refill+w", "refill+t"]


def child(conn) -> None:
    torch.cuda.init()
    x = conn.recv()  # a CUDA tensor through IPC
    one = torch.zeros(1, device="cuda")
    stride = max(1, (2 << 20) // 4)
    start_ev, end_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.sigmoid(x)
    torch.cuda.synchronize()
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if isinstance(msg, tuple) and msg[0] == "x":
            x = msg[1]
            torch.sigmoid(x)
            torch.cuda.synchronize()
            conn.send("ok")
            continue
        mode = msg
        if mode == "refill+w":
            one.add_(1)
            torch.cuda.synchronize()
        elif mode == "refill+t":
            x.view(-1)[::stride].sum()
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        start_ev.record()
        y = torch.sigmoid(x)
        end_ev.record()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        conn.send((wall * 1e3, start_ev.elapsed_time(end_ev)))
        del y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    parent_conn, child_conn = ctx.Pipe()
    proc = ctx.Process(target=child, args=(child_conn,))
    proc.start()
    flush = torch.empty(100 << 20, dtype=torch.uint8, device="cuda")
    one = torch.zeros(1, device="cuda")
    rows = []
    first = True
    for b, d in SIZES:
        x = torch.randn(b, d, device="cuda")
        if first:
            parent_conn.send(x)
            first = False
        else:
            parent_conn.send(("x", x))
            parent_conn.recv()
        mb = x.numel() * 4 / 2**20
        # the parent alone: flush, then wall clock around sigmoid + synchronise, and events
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        walls, evs = [], []
        for i in range(args.iters + 3):
            flush.zero_()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            s.record()
            y = torch.sigmoid(x)
            e.record()
            torch.cuda.synchronize()
            if i >= 3:
                walls.append((time.perf_counter() - t0) * 1e3)
                evs.append(s.elapsed_time(e))
            del y
        rows.append((f"{b}x{d}", f"{mb:.0f}", "parent alone", statistics.median(walls), statistics.median(evs), 0.0))
        for mode in MODES:
            walls, evs, rts = [], [], []
            for i in range(args.iters + 3):
                if mode == "tiny":
                    one.add_(1)
                elif mode == "flush":
                    flush.zero_()
                elif mode.startswith("refill"):
                    x.normal_()
                    flush.zero_()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                parent_conn.send(mode)
                wall, ev = parent_conn.recv()
                rt = (time.perf_counter() - t0) * 1e3
                if i >= 3:
                    walls.append(wall)
                    evs.append(ev)
                    rts.append(rt)
            rows.append((f"{b}x{d}", f"{mb:.0f}", mode, statistics.median(walls), statistics.median(evs),
                         statistics.median(rts)))
    parent_conn.send(None)
    proc.join()
    print(f"{'size':>12} {'MB':>5} {'mode':>13} {'wall ms':>9} {'event ms':>9} {'parent rt ms':>12}")
    for r in rows:
        print(f"{r[0]:>12} {r[1]:>5} {r[2]:>13} {r[3]:9.4f} {r[4]:9.4f} {r[5]:12.4f}")


if __name__ == "__main__":
    main()
