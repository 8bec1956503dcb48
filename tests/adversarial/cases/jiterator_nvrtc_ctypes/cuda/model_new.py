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
    patterns = [os.path.join(p, "nvidia", "*", "lib", "libnvrtc.so*") for p in sys.path if p]
    patterns += ["/usr/local/cuda*/lib64/libnvrtc.so*", "/usr/local/cuda*/targets/*/lib/libnvrtc.so*",
                 "/usr/lib/x86_64-linux-gnu/libnvrtc.so*", "/opt/*/lib*/libnvrtc.so*"]
    for path in sorted({os.path.realpath(p) for pat in patterns for p in glob.glob(pat)}):
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
