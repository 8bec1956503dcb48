"""Whether closing NVRTC in the candidate stops PyTorch's run-time-compiled CUDA ops (the "jiterator")
and leaves what a solution may use (cuBLAS, cuDNN convolutions, its own kernels) running.

Each op runs in its own fresh process (a closed NVRTC ends a process with SIGSEGV), three ways: behind
the fatbin wall only (as the candidate was before); as a candidate of a task with no convolution now is
(Landlock with NVRTC's files and cuDNN's unreadable, the wall with cuDNN walled, NVRTC's code covered:
``nvrtc_wall.close_compiler``); as a candidate of a convolution task (Landlock with NVRTC's files
unreadable, cuDNN kept, NVRTC not covered). The parent also says where NVRTC is mapped after
``import torch`` and what closing and narrowing cost.

    python bench/scripts/gpu_probe_nvrtc.py          # nvrtc.json to $OUT when set
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys

OPS = ["special.bessel_j0", "special.chebyshev_polynomial_t", "special.airy_ai", "relu (walled)",
       "matmul (cuBLAS)", "conv2d fp32 3->64 k3 256x256", "conv2d fp32 64->128 k1", "conv2d depthwise k3",
       "conv2d fp16 64->64 k3", "conv3d fp32 3->16 k3", "conv_transpose2d fp32 32->16 k3",
       "conv1d fp32 64->128 k5", "conv2d bf16 128->128 k3 bench"]


def run_op(name: str) -> str:
    import torch
    import torch.nn.functional as F

    x = torch.rand(1 << 16, device="cuda")

    def conv(dtype, shape, w_shape, fn, **kw):
        a = torch.randn(*shape, device="cuda", dtype=dtype)
        w = torch.randn(*w_shape, device="cuda", dtype=dtype)
        return fn(a, w, **kw), (lambda: fn(a.float().cpu(), w.float().cpu(), **kw))

    if name.startswith("special."):
        fn = {"special.bessel_j0": torch.special.bessel_j0,
              "special.chebyshev_polynomial_t": lambda t: torch.special.chebyshev_polynomial_t(t, 3),
              "special.airy_ai": torch.special.airy_ai}[name]
        y, ref = fn(x), lambda: fn(x.cpu())
    elif name.startswith("relu"):
        y, ref = torch.relu(x), lambda: torch.relu(x.cpu())
    elif name.startswith("matmul"):
        a = torch.randn(256, 256, device="cuda")
        y, ref = a @ a, lambda: a.cpu() @ a.cpu()
    elif name == "conv2d fp32 3->64 k3 256x256":
        y, ref = conv(torch.float32, (16, 3, 256, 256), (64, 3, 3, 3), F.conv2d)
    elif name == "conv2d fp32 64->128 k1":
        y, ref = conv(torch.float32, (16, 64, 64, 64), (128, 64, 1, 1), F.conv2d)
    elif name == "conv2d depthwise k3":
        y, ref = conv(torch.float32, (16, 64, 64, 64), (64, 1, 3, 3), F.conv2d, groups=64)
    elif name == "conv2d fp16 64->64 k3":
        y, ref = conv(torch.float16, (16, 64, 64, 64), (64, 64, 3, 3), F.conv2d, padding=1)
    elif name == "conv3d fp32 3->16 k3":
        y, ref = conv(torch.float32, (4, 3, 32, 64, 64), (16, 3, 3, 3, 3), F.conv3d)
    elif name == "conv_transpose2d fp32 32->16 k3":
        y, ref = conv(torch.float32, (8, 32, 64, 64), (32, 16, 3, 3), F.conv_transpose2d, stride=2)
    elif name == "conv1d fp32 64->128 k5":
        y, ref = conv(torch.float32, (16, 64, 1024), (128, 64, 5), F.conv1d)
    else:
        torch.backends.cudnn.benchmark = True
        y, ref = conv(torch.bfloat16, (8, 128, 64, 64), (128, 128, 3, 3), F.conv2d, padding=1)
    torch.cuda.synchronize()
    want = ref()
    tol = 5e-2 if y.dtype != torch.float32 else 2e-2
    ok = torch.allclose(y.cpu().float(), want.float(), rtol=tol, atol=tol * max(1.0, float(want.abs().max())) * 0.05,
                        equal_nan=True)
    return "ran, right" if ok else "ran, wrong"


MODES = ("wall only", "task without conv: Landlock, wall, NVRTC closed", "conv task: Landlock (no NVRTC files), wall")


def child(name: str, mode: int) -> None:
    import time

    import torch

    from kag.core.trust import confine, fatbin_wall, nvrtc_wall

    scan = fatbin_wall.library_scan(os.environ.get("KAG_CACHE_DIR"))
    conv_task = mode == 2
    cost = {}
    if mode:  # the candidate's Landlock (made at fork), then the task's narrowing (made in prepare)
        t0 = time.perf_counter()
        first = tuple(fatbin_wall.fatbin_files(cache_dir=os.environ.get("KAG_CACHE_DIR"))) + tuple(scan["compilers"])
        reads = tuple(confine.system_read_paths()) + (os.getcwd(), "/tmp")
        devices = tuple(confine.device_paths(True))
        listings = confine.holder_listings(list(scan["sections"]) + list(scan["compilers"]))
        confine.apply_landlock(confine.LandlockPolicy(read=reads, write=("/tmp", "/proc/self"), devices=devices,
                                                      exclude=first, listings=listings))
        cost["landlock_s"] = round(time.perf_counter() - t0, 3)
        if not conv_task:
            t0 = time.perf_counter()
            more = tuple(p for p in scan["sections"] if not fatbin_wall.allowed(p, True, False) and p not in first)
            confine.apply_landlock(confine.LandlockPolicy(read=reads, write=("/tmp", "/proc/self"), devices=devices,
                                                          exclude=first + more, listings=listings))
            cost["narrow_s"] = round(time.perf_counter() - t0, 3)
            cost["narrowed"] = len(more)
    torch.cuda.init()
    torch.empty(1, device="cuda")
    fatbin_wall.preload("cuda")
    fatbin_wall.raise_wall(allow_cudnn=mode != 1, sections=scan["sections"])
    covered = []
    if mode == 1:
        t0 = time.perf_counter()
        covered = nvrtc_wall.close_compiler(scan["compilers"])
        cost["close_s"] = round(time.perf_counter() - t0, 4)
    try:
        print(json.dumps({"result": run_op(name), "covered": covered, "cost": cost}), flush=True)
    except Exception as exc:  # noqa: BLE001
        print(json.dumps({"result": f"failed: {str(exc).splitlines()[0][:160]}", "covered": covered, "cost": cost}),
              flush=True)


def one(name: str, mode: int) -> tuple[str, dict]:
    proc = subprocess.run([sys.executable, __file__, "--child", name, str(mode)], capture_output=True,
                          text=True, timeout=300)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            got = json.loads(line)
            return got["result"] + (f" (covered {','.join(got['covered'])})" if got["covered"] else ""), got["cost"]
    return f"process ended rc {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:160]}", {}


def main() -> None:
    import torch

    mapped = sorted({ln.split()[-1] for ln in open("/proc/self/maps") if "nvrtc" in ln})
    torch.cuda.init()
    torch.empty(1, device="cuda")
    mapped_cuda = sorted({ln.split()[-1] for ln in open("/proc/self/maps") if "nvrtc" in ln})
    from kag.core.trust import fatbin_wall

    fatbin_wall.fatbin_sections(os.environ.get("KAG_CACHE_DIR"))  # the scan cached once for the children
    out: dict = {"torch": torch.__version__, "mapped after import": mapped, "mapped after cuda init": mapped_cuda,
                 "cudnn": torch.backends.cudnn.version(), "ops": {}}
    jobs = [(name, mode) for name in OPS for mode in range(len(MODES))]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda job: one(*job), jobs))
    costs: dict = {}
    for (name, mode), (result, cost) in zip(jobs, results):
        out["ops"].setdefault(name, {})[MODES[mode]] = result
        for key, value in cost.items():
            costs.setdefault(f"{MODES[mode]}: {key}", []).append(value)
    out["cost"] = {k: [min(v), max(v)] for k, v in costs.items()}
    print(json.dumps(out, indent=1))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "nvrtc.json"), "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
