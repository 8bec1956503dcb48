"""The baselines a candidate is timed against: eager PyTorch and torch.compile.

A baseline turns the reference ``Model`` into the callable the judge times with the same loop as
the candidate. ``compile`` takes ``mode``: default, max-autotune-no-cudagraphs, reduce-overhead
(or max-autotune); the mode is part of the baseline cache key.
"""

from __future__ import annotations

import shutil
from typing import Any, Callable

from kag.plugin import COMPILE_MODES, hookimpl


class EagerBaseline:
    name = "eager"

    def __init__(self, mode: str | None = "default"):
        if mode not in (None, "", "default"):
            raise ValueError(f"the eager baseline has no modes (got {mode!r})")
        self.mode = "default"

    def prepare(self, model: Any) -> Callable[..., Any]:
        return model


class CompileBaseline:
    name = "compile"

    def __init__(self, mode: str | None = "default"):
        mode = mode or "default"
        if mode not in COMPILE_MODES:
            raise ValueError(f"unknown torch.compile mode {mode!r}; choose one of {', '.join(COMPILE_MODES)}")
        self.mode = mode

    @staticmethod
    def check_available() -> str | None:
        if not any(shutil.which(cc) for cc in ("c++", "g++", "clang++")):
            return "torch.compile needs a C++ compiler (c++/g++/clang++) on PATH"
        return None

    def prepare(self, model: Any) -> Callable[..., Any]:
        import torch

        return torch.compile(model, mode=None if self.mode == "default" else self.mode)


@hookimpl
def kag_register_baselines(register) -> None:
    register("eager", EagerBaseline)
    register("compile", CompileBaseline)
