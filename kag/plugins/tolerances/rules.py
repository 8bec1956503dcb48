"""Tolerance policies: how close a candidate's floating-point outputs must be to the reference's.

``cuda-agent`` is the paper's (atol = rtol = 1e-2 for every dtype); ``strict`` is KernelBench's
current one (1e-4 for fp32/fp64, 1e-2 for fp16/bf16), under which an fp32 task computed in half
precision fails. An element passes when ``|out - ref| <= atol + rtol * |ref|``.
"""

from __future__ import annotations

from typing import Any

from kag.plugin import hookimpl


class CudaAgentTolerance:
    name = "cuda-agent"

    def __init__(self, atol: float = 1e-2, rtol: float = 1e-2):
        self.atol, self.rtol = float(atol), float(rtol)

    def tolerance(self, dtype: Any) -> tuple[float, float]:
        return self.atol, self.rtol


class StrictTolerance:
    name = "strict"

    def __init__(self, full: float = 1e-4, half: float = 1e-2):
        self.full, self.half = float(full), float(half)

    def tolerance(self, dtype: Any) -> tuple[float, float]:
        import torch

        low = {torch.float16, torch.bfloat16}
        for name in ("float8_e4m3fn", "float8_e5m2"):
            if hasattr(torch, name):
                low.add(getattr(torch, name))
        tol = self.half if dtype in low else self.full
        return tol, tol


@hookimpl
def kag_register_tolerances(register) -> None:
    register("cuda-agent", CudaAgentTolerance)
    register("strict", StrictTolerance)
