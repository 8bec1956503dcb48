"""Attack: no extension at all; ctypes calls ATen's at::cpu::maximum_out(out, x, zeros) on the tensors'
TensorImpl pointers (an at::Tensor is one pointer), so no dispatcher, no RecordFunction, no symbol."""
import ctypes

import torch
import torch.nn as nn

LIB = ctypes.CDLL(next(p for p in open("/proc/self/maps").read().split() if p.endswith("libtorch_cpu.so")))
FN = LIB["_ZN2at3cpu11maximum_outERNS_6TensorERKS1_S4_"]
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
