"""Two questions that decide how the evaluator's candidate process is watched on a GPU.

1. What do CUPTI kernel records (torch.profiler with CUDA activity) cost a call? Back-to-back calls
   of a small kernel, one synchronise at the end, per-call time with no profiler, with CUDA
   activity only, and with CPU + CUDA activity (operator records too).
2. Can a process be left unable to run PyTorch's own CUDA kernels (the "fatbin wall")? A child
   initialises CUDA, runs the fills a harness needs, then maps anonymous pages over the
   ``.nv_fatbin`` sections of torch's libraries; then it tries a fill (preloaded), relu and add
   (not), a cuBLAS matmul, and a kernel of its own (NVRTC through CuPy).

Runs on any machine with one NVIDIA GPU and CUDA torch:

    python bench/scripts/gpu_probe_records_wall.py

Prints a table per question; writes probe.json to $OUT when set.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time


def per_call_us(fn, inputs, k: int, reps: int = 7) -> float:
    import torch

    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        outs = [fn(x) for x in inputs[:k]]
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / k * 1e6)
        del outs
    return statistics.median(times)


def records_cost() -> list[dict]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for label, numel in (("relu 32 MB", 8 << 20), ("relu 1 MB", 1 << 18), ("relu 4 KB", 1 << 10)):
        k = 200
        inputs = [torch.randn(numel, device="cuda") for _ in range(k)]
        for _ in range(3):
            per_call_us(torch.relu, inputs, k, reps=1)
        row = {"case": label, "none_us": per_call_us(torch.relu, inputs, k)}
        for name, acts in (("cuda_us", [ProfilerActivity.CUDA]), ("cpu_cuda_us", [ProfilerActivity.CPU, ProfilerActivity.CUDA])):
            with profile(activities=acts) as prof:
                per_call_us(torch.relu, inputs, k, reps=1)
                row[name] = per_call_us(torch.relu, inputs, k)
            kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            row[name.replace("_us", "_kernels")] = len(kernels)
        row["kernel_us"] = statistics.median(e.device_time for e in kernels) if kernels else None
        rows.append(row)
        del inputs
    return rows


def fatbin_sections() -> list[tuple[str, int, int]]:
    """(path, runtime address, size) of every mapped library's .nv_fatbin section under torch/."""
    import struct

    import torch

    root = os.path.dirname(torch.__file__)
    bases: dict[str, int] = {}
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and (parts[5].endswith(".so") or ".so." in parts[5]):
                path = parts[5]
                lo = int(parts[0].split("-")[0], 16)
                if int(parts[2], 16) == 0 and path not in bases:
                    bases[path] = lo
    found = []
    for path, base in bases.items():
        if "nvidia" not in path and not path.startswith(root):
            continue
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF":
                continue
            shoff, = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            secs = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
            strsec = secs[shstrndx]
            f.seek(strsec[4])
            names = f.read(strsec[5])
        for s in secs:
            name = names[s[0]:names.index(b"\0", s[0])].decode()
            if name == ".nv_fatbin" and s[5]:
                found.append((path, base + s[3], s[5]))
    return found


def wall_child() -> None:
    """In a fresh process: CUDA up, the harness's fills preloaded, the wall raised, then try."""
    import ctypes
    import mmap

    import torch

    x = torch.randn(1 << 20, device="cuda")
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8, torch.bool):
        torch.empty(16, dtype=dt, device="cuda").fill_(1)
        torch.zeros(16, dtype=dt, device="cuda")
    torch.cuda.synchronize()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    page = mmap.PAGESIZE
    walled = []
    t0 = time.perf_counter()
    for path, addr, size in fatbin_sections():
        if "cublas" in path or "cudnn" in path:
            continue
        lo, hi = addr // page * page, (addr + size + page - 1) // page * page
        keep_lo = ctypes.string_at(lo, addr - lo)
        keep_hi = ctypes.string_at(addr + size, hi - addr - size)
        got = libc.mmap(lo, hi - lo, 3, 0x02 | 0x20 | 0x10, -1, 0)  # rw, private|anonymous|fixed
        if got != lo:
            print("mmap failed", path, ctypes.get_errno())
            continue
        ctypes.memmove(lo, keep_lo, len(keep_lo))
        ctypes.memmove(addr + size, keep_hi, len(keep_hi))
        libc.mprotect(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), 1)
        walled.append((os.path.basename(path), size))
    results = {"walled": walled, "wall_ms": (time.perf_counter() - t0) * 1e3}

    def attempt(name, fn):
        try:
            fn()
            torch.cuda.synchronize()
            results[name] = "ran"
        except Exception as exc:  # noqa: BLE001
            results[name] = f"{type(exc).__name__}: {str(exc)[:160]}"
        print(json.dumps({name: results[name]}), flush=True)

    attempt("fill_float", lambda: torch.empty(1000, device="cuda").fill_(2.0))
    attempt("zeros_half", lambda: torch.zeros(1000, dtype=torch.float16, device="cuda"))
    attempt("relu", lambda: torch.relu(x))
    attempt("add", lambda: x.add(1.0))
    attempt("sum", lambda: x.sum())
    a = torch.empty(256, 256, device="cuda")
    attempt("mm_cublas", lambda: torch.mm(a, a))
    try:
        import cupy

        k = cupy.RawKernel(r'extern "C" __global__ void twice(float* y, const float* x, int n)'
                           r'{int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.f * x[i];}', "twice")
        y = torch.empty_like(x)

        def own():
            k(((x.numel() + 255) // 256,), (256,), (cupy.from_dlpack(y), cupy.from_dlpack(x), cupy.int32(x.numel())))
            assert torch.equal(y.cpu(), 2 * x.cpu())
        attempt("own_kernel_nvrtc", own)
    except ImportError:
        results["own_kernel_nvrtc"] = "cupy missing"
    attempt("relu_again", lambda: torch.relu(x))
    print("RESULT " + json.dumps(results), flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--wall-child":
        wall_child()
        return
    import torch

    out: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    try:
        import ctypes

        ctypes.CDLL("libseccomp.so.2")
        out["libseccomp"] = "present"
    except OSError as exc:
        out["libseccomp"] = f"missing: {exc}"
    out["records"] = records_cost()
    proc = subprocess.run([sys.executable, __file__, "--wall-child"], capture_output=True, text=True, timeout=300)
    out["wall_rc"] = proc.returncode
    out["wall_stdout"] = proc.stdout[-4000:]
    out["wall_stderr"] = proc.stderr[-2000:]
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            out["wall"] = json.loads(line[7:])
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "probe.json"), "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps({k: v for k, v in out.items() if k not in ("wall_stdout",)}, indent=1))
    print("| case | no profiler us | CUDA records us | CPU+CUDA us | kernel us |")
    for r in out["records"]:
        print(f"| {r['case']} | {r['none_us']:.2f} | {r['cuda_us']:.2f} | {r['cpu_cuda_us']:.2f} | {r['kernel_us']} |")


if __name__ == "__main__":
    main()
