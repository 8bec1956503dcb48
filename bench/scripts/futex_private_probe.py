"""Does a candidate need a futex shared between processes? Before refusing them (a channel).

A futex without FUTEX_PRIVATE_FLAG on a mapping of a file two candidates can read is keyed on the
file's inode: one waits, the other wakes, 16 of 16 bits between concurrent candidates through both
of kag's filters (bench/results/2026-11-29-6629b72-cpu). Refusing every futex call without the
private flag (and futex_waitv, whose flags lie in memory, and the futex2 calls without
FUTEX2_PRIVATE) closes it, if nothing a candidate runs needs a shared one.

kag's candidate filter does that where ``shared_futex`` is False (a CPU candidate's, today). This
probe runs each workload in a fresh child under that filter and reports whether it finished, failed
or hung (glibc aborts on an unexpected futex error, so a use shows as a crash); the same workload
under the filter with shared futexes allowed (a GPU candidate's, today) is the control. CPU
workloads: torch's intra-op threads, an OpenMP region, Python threads with locks, conditions, queues
and a thread pool, and the channel's own call. With --cuda: CUDA's start, a kernel, cuBLAS, streams
and events, pinned memory, an IPC handle, torch.profiler with kernel records.

    python3 bench/scripts/futex_private_probe.py [--cuda] [--out DIR]

x86_64 only (the syscall numbers). Trusted bench code; writes futex_private.json.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

FUTEX = 202  # x86_64


def cpu_work() -> str:
    import concurrent.futures
    import queue
    import threading

    import torch

    torch.set_num_threads(2)
    a = torch.randn(512, 512)
    for _ in range(20):
        (a @ a).sum().item()  # intra-op threads
    b = torch.randn(4_000_000)
    for _ in range(20):
        torch.add(b, 1.0).relu_()  # an OpenMP region
    lock, cond, q, box = threading.Lock(), threading.Condition(), queue.Queue(), []

    def worker(i: int) -> None:
        with lock:
            box.append(i)
        with cond:
            cond.notify_all()
        q.put(i)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        total = sum(pool.map(lambda x: x * x, range(100)))
    return f"threads {len(box)}, queue {q.qsize()}, pool {total}; {shared_wake()}"


def shared_wake() -> str:
    """The channel's own call: FUTEX_WAKE without the private flag on a page of a file's mapping."""
    import mmap

    import torch

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.syscall.restype = ctypes.c_long
    fd = os.open(torch.__file__, os.O_RDONLY)
    address = libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    rc = libc.syscall(ctypes.c_long(FUTEX), ctypes.c_void_p(address), ctypes.c_int(1), ctypes.c_int(1),
                      None, None, ctypes.c_int(0))  # FUTEX_WAKE, no private flag
    err = ctypes.get_errno()
    os.close(fd)
    return f"shared FUTEX_WAKE on a file page: rc {rc}" + (f" ({errno.errorcode.get(err, err)})" if rc < 0 else "")


def cuda_work() -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(1024, 1024, device="cuda")
    y = (x @ x).relu()  # cuBLAS, a kernel
    s = torch.cuda.Stream()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(s):
        e0.record()
        z = y * 2
        e1.record()
    torch.cuda.synchronize()
    pinned = torch.empty(1 << 20, pin_memory=True)
    pinned.copy_(z.flatten()[: 1 << 20].cpu())
    from kag.core.eval.candidate.gpu_outputs import CudaApi

    api = CudaApi()
    base, _ = api.address_range(z.data_ptr())
    handle = api.ipc_handle(base)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            (x @ x).sum()
        torch.cuda.synchronize()
    kernels = sum(1 for ev in prof.events() if ev.device_type == torch.autograd.DeviceType.CUDA)
    return f"event {e0.elapsed_time(e1):.3f} ms, ipc handle {len(handle)} bytes, profiler kernels {kernels}"


def run(work, refuse: bool, limit_s: float) -> dict:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            from kag.core.trust import confine

            confine.apply_seccomp(own_pid=os.getpid(), shared_futex=not refuse)
            out = {"ok": True, "said": work()}
        except BaseException as exc:  # noqa: BLE001 - reported
            out = {"ok": False, "said": f"{type(exc).__name__}: {exc}"[:300]}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    deadline, data = time.monotonic() + limit_s, b""
    os.set_blocking(r, False)
    while time.monotonic() < deadline:
        try:
            chunk = os.read(r, 65536)
        except BlockingIOError:
            time.sleep(0.05)
            continue
        if not chunk:
            break
        data += chunk
    hung = time.monotonic() >= deadline
    if hung:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(r)
    if hung:
        return {"ok": False, "said": f"hung (killed after {limit_s:g} s)"}
    if not data:
        return {"ok": False, "said": f"died: {'signal ' + str(os.WTERMSIG(status)) if os.WIFSIGNALED(status) else 'status ' + str(os.WEXITSTATUS(status))}"}
    return json.loads(data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--limit", type=float, default=120.0)
    ap.add_argument("--out", default=os.environ.get("OUT", ""))
    args = ap.parse_args()
    import importlib

    importlib.import_module("torch")  # before the fork, as the judge has it (CUDA starts in the child)

    rows = []
    for name, work in (("cpu", cpu_work),) + ((("cuda", cuda_work),) if args.cuda else ()):
        for refuse in (False, True):
            row = {"workload": name, "shared futexes": "refused" if refuse else "allowed (control)",
                   **run(work, refuse, args.limit)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "futex_private.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
