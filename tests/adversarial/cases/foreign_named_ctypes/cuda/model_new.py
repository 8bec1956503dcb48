"""Attack: kernels/ declares dummies named like PyTorch's kernels; forward runs ATen's maximum_out
through ctypes (no dispatcher, no RecordFunction), whose kernel names match the dummies' pattern."""
import ctypes

import torch
import torch.nn as nn

import cuda_extension  # noqa: F401 - the dummies are built in

LIB = ctypes.CDLL(next(p for p in open("/proc/self/maps").read().split() if p.endswith("libtorch_cuda.so")))
FN = LIB["_ZN2at4cuda11maximum_outERNS_6TensorERKS1_S4_"]
FN.restype = ctypes.c_void_p


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        zero = torch.zeros(1, dtype=x.dtype, device=x.device)
        refs = [ctypes.c_void_p(t._cdata) for t in (out, x, zero)]
        FN(*[ctypes.byref(r) for r in refs])
        return out
