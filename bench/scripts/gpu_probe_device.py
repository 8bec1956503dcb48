"""Probe what the evaluator's isolation and timing design relies on, on the machine it runs on.

Prints one JSON object: kernel features (Landlock ABI, seccomp, cgroups, ptrace scope, device
file modes), CUDA IPC between a root process and a process under another uid (both directions,
the root side non-dumpable), GPU time slicing seen by a probe kernel while another context is
busy, pipe round trips, SIGSTOP/SIGCONT costs and the cost of a device-wide synchronise.
Usage: python3 bench/scripts/gpu_probe_device.py [--out FILE]
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import time

OUT: dict = {}
libc = ctypes.CDLL(None, use_errno=True)


def features() -> dict:
    f: dict = {"uname": os.uname().release}
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    f["landlock_abi"] = abi if abi >= 0 else f"errno {ctypes.get_errno()}"
    f["seccomp_status_line"] = [l for l in open("/proc/self/status") if l.startswith("Seccomp")]
    f["yama_ptrace_scope"] = open("/proc/sys/kernel/yama/ptrace_scope").read().strip() \
        if os.path.exists("/proc/sys/kernel/yama/ptrace_scope") else None
    f["cgroup_mounts"] = [l.split()[1:3] for l in open("/proc/mounts") if "cgroup" in l]
    f["dev_nvidia"] = {p: oct(os.stat("/dev/" + p).st_mode) for p in sorted(os.listdir("/dev")) if p.startswith("nvidia")}
    f["unshare_pid"] = subprocess.run(["unshare", "--pid", "--fork", "--kill-child", "true"],
                                      capture_output=True, text=True).returncode
    f["unshare_net"] = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True).returncode
    f["lsm"] = open("/sys/kernel/security/lsm").read().strip() if os.path.exists("/sys/kernel/security/lsm") else None
    return f


def ipc_child(conn, uid):
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    import torch
    import torch.multiprocessing  # noqa
    from multiprocessing.reduction import ForkingPickler
    res = {"uid": os.getuid(), "dumpable": libc.prctl(3, 0, 0, 0, 0)}
    try:
        t = torch.arange(8, device="cuda", dtype=torch.float32) * 3
        torch.cuda.synchronize()
        conn.send_bytes(bytes(ForkingPickler.dumps(t)))
        res["child_to_parent_sent"] = True
    except Exception as e:
        res["child_to_parent_error"] = repr(e)
        conn.send_bytes(b"")
    try:
        import pickle
        data = conn.recv_bytes()
        got = pickle.loads(data)
        res["parent_to_child"] = got.tolist()
    except Exception as e:
        res["parent_to_child_error"] = repr(e)[:300]
    try:  # can the child read the parent's memory?
        with open(f"/proc/{os.getppid()}/mem", "rb") as fh:
            fh.read(1)
        res["parent_mem_open"] = "opened"
    except Exception as e:
        res["parent_mem_open"] = repr(e)[:120]
    conn.send(res)
    time.sleep(0.5)


def cuda_ipc_across_uid() -> dict:
    import multiprocessing as mp
    a, b = mp.Pipe()
    pid = os.fork()
    if pid == 0:
        try:
            ipc_child(b, 61234)
        finally:
            os._exit(0)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0 in the parent
    import pickle
    import torch
    import torch.multiprocessing  # noqa
    from multiprocessing.reduction import ForkingPickler
    out: dict = {}
    try:
        data = a.recv_bytes()
        if data:
            t = pickle.loads(data)
            out["child_to_parent"] = t.tolist()
    except Exception as e:
        out["child_to_parent_error"] = repr(e)[:300]
    p = torch.arange(4, device="cuda", dtype=torch.float32) + 100
    torch.cuda.synchronize()
    a.send_bytes(bytes(ForkingPickler.dumps(p)))
    out["child"] = a.recv()
    os.waitpid(pid, 0)
    libc.prctl(4, 1, 0, 0, 0)
    return out


def busy_child(mode):
    """Run in a fresh interpreter: keep the GPU busy from another context (a CUDA-initialised
    parent cannot fork one)."""
    import torch
    torch.cuda.init()
    x = torch.empty(1, device="cuda")
    w = 1
    os.write(w, b"r")
    cycles = int(1.98e9 * 0.2)  # ~200 ms
    if mode == "long":
        torch.cuda._sleep(cycles)
    else:
        for _ in range(20000):
            torch.cuda._sleep(int(1.98e6 * 0.01))  # 10 us kernels back to back
    os.write(w, b"l")
    torch.cuda.synchronize()
    os.write(w, b"e")


def probe_latency(torch, n=50):
    x = torch.zeros(1, device="cuda")
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        x.add_(1)
        torch.cuda.synchronize()
        lat.append((time.perf_counter() - t0) * 1e6)
    return lat


def timeslice() -> dict:
    res = {}
    for mode in ("long", "short"):
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--busy", mode], stdout=subprocess.PIPE)
        import torch
        r = proc.stdout.fileno()
        os.read(r, 1)
        os.read(r, 1)  # launched
        t0 = time.perf_counter()
        lat = probe_latency(torch, 30)
        res[mode] = {"probe_us_while_busy": [round(v) for v in lat[:30]], "elapsed_ms": round((time.perf_counter() - t0) * 1e3, 1)}
        os.read(r, 1)
        res[mode]["busy_done_after_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
        proc.wait()
    import torch
    res["idle_probe_us"] = statistics.median(probe_latency(torch, 200))
    return res


def pipe_rtt() -> dict:
    g_r, g_w = os.pipe()
    d_r, d_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.set_blocking(g_r, False)
        for _ in range(4000):
            while True:
                try:
                    os.read(g_r, 8)
                    break
                except BlockingIOError:
                    pass
            os.write(d_w, b"d" * 8)
        os._exit(0)
    spin, block = [], []
    os.set_blocking(d_r, False)
    for i in range(4000):
        t0 = time.perf_counter()
        os.write(g_w, b"g" * 8)
        if i % 2:
            while True:
                try:
                    os.read(d_r, 8)
                    break
                except BlockingIOError:
                    pass
            spin.append((time.perf_counter() - t0) * 1e6)
        else:
            import select
            select.select([d_r], [], [])
            os.read(d_r, 8)
            block.append((time.perf_counter() - t0) * 1e6)
    os.waitpid(pid, 0)
    q = lambda v: {"p10": round(statistics.quantiles(v, n=10)[0], 2), "median": round(statistics.median(v), 2),
                   "p90": round(statistics.quantiles(v, n=10)[8], 2)}
    return {"spin_both_us": q(spin[100:]), "select_judge_us": q(block[100:])}


def stop_cont() -> dict:
    pid = os.fork()
    if pid == 0:
        while True:
            time.sleep(0.001)
    cost = []
    for _ in range(200):
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGSTOP)
        os.waitpid(pid, os.WUNTRACED)
        os.kill(pid, signal.SIGCONT)
        cost.append((time.perf_counter() - t0) * 1e6)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return {"stop_wait_cont_us_median": round(statistics.median(cost), 1)}


def sync_cost() -> dict:
    import torch
    torch.cuda.synchronize()
    empty = []
    for _ in range(500):
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        empty.append((time.perf_counter() - t0) * 1e6)
    x = torch.randn(1 << 20, device="cuda")
    ev = []
    wall = []
    for _ in range(300):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s.record()
        y = torch.relu(x)
        e.record()
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) * 1e6)
        ev.append(s.elapsed_time(e) * 1e3)
    return {"empty_sync_us": round(statistics.median(empty), 2), "relu_4MB_event_us": round(statistics.median(ev), 2),
            "relu_4MB_wall_us": round(statistics.median(wall), 2)}


def section(name, fn):
    signal.alarm(60)
    try:
        OUT[name] = fn()
    except BaseException as e:  # noqa: BLE001 - a probe that fails says why
        OUT[name] = f"failed: {e!r}"[:400]
    finally:
        signal.alarm(0)


if __name__ == "__main__":
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # no cuInit before the forks
    if sys.argv[1:2] == ["--busy"]:
        busy_child(sys.argv[2])
        sys.exit(0)
    signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError("section timed out")))
    OUT["features"] = features()
    section("pipe_rtt", pipe_rtt)
    section("stop_cont", stop_cont)
    import torch
    if torch.cuda.is_available():
        section("cuda_ipc_across_uid", cuda_ipc_across_uid)
        section("timeslice", timeslice)
        section("sync", sync_cost)
    text = json.dumps(OUT, indent=1)
    if len(sys.argv) > 2 and sys.argv[1] == "--out":
        open(sys.argv[2], "w").write(text)
    print(text)
