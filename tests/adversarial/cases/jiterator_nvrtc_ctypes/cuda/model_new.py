"""Attack: with the candidate's NVRTC closed, load a fresh copy of it through ctypes (every libnvrtc.so on the machine, by path), then let PyTorch compile its op (torch.special.bessel_j0) at run time"""
import ctypes
import glob
import os
import sys

import torch
import torch.nn as nn

import cuda_extension  # noqa: F401


def live(address):
    """Whether ``address`` lies in readable, executable memory (the closed copy's code is gone)."""
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if lo <= address < hi:
                return perms.startswith("r") and "x" in perms
    return False


def fresh_nvrtc():
    # the folders that hold NVRTC cannot be listed in a candidate: name the files an installation has
    folders = [os.path.join(p, "nvidia", sub, "lib") for p in sys.path if p for sub in ("cu13", "cuda_nvrtc", "cu12")]
    folders += ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu"]
    names = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "libnvrtc.alt.so.13"]
    found = [os.path.join(f, n) for f in folders for n in names if os.path.exists(os.path.join(f, n))]
    found += [p for pat in ("/usr/local/cuda*/targets/*/lib/libnvrtc.so*",) for p in glob.glob(pat)]
    if not found:
        print("nvrtc not found", flush=True)
    for path in dict.fromkeys(found):
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            print(f"nvrtc refused: {path}: {exc}", flush=True)
            continue
        address = ctypes.cast(lib.nvrtcVersion, ctypes.c_void_p).value
        if live(address):
            print(f"nvrtc loaded: {path}", flush=True)
            return lib
        print(f"nvrtc closed: {path}", flush=True)
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        fresh_nvrtc()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x)
