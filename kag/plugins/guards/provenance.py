"""``kernel-provenance``: every GPU kernel launched while the candidate ran must be the
candidate's own (a ``__global__`` function of its kernels/ or a function defined in its built
extension) or come from an allowed library (cuBLAS/CUTLASS for GEMM, cuDNN for conv, per policy),
or be a memcpy/memset/constant fill. Catches decoy kernels next to torch compute, torch.compile's
Triton kernels and anything the static checks missed. The kernels are those the profiler running
through every call recorded (kag.core.eval.candidate.observe); the names the solution defines are read in the
judge from its trusted copies of the sources and the built extension. CUDA only.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from kag.plugin import GuardBase, RunInfo, Violation, hookimpl, strip_cpp_comments

GLOBAL_FN = re.compile(r"__global__\s+(?:[\w:<>,\s\*&]*?\s)?(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
ALWAYS_ALLOWED = re.compile(r"^(Memcpy|Memset|cudaMemcpy|cudaMemset)|FillFunctor|fill_kernel", re.IGNORECASE)
CUBLAS_KERNELS = re.compile(r"gemm|gemv|nvjet|cutlass|xmma|cublas|splitKreduce|dot_kernel|gemmk1|"
                            r"reduce_1Block_kernel|axpy|scal_kernel|trsm|syrk", re.IGNORECASE)
# Conv kernels name their pass (fprop/dgrad/wgrad, implicit GEMM); "xmma"/"cutlass" alone are GEMM
# kernels too, so they are cuBLAS's, and a cuBLAS kernel is not let through as cuDNN's.
CUDNN_KERNELS = re.compile(r"cudnn|conv|fprop|dgrad|wgrad|winograd|fft|implicit|"
                           r"nchwToNhwc|nhwcToNchw|im2col|precomputed|scudnn|tensorTransform", re.IGNORECASE)
FOREIGN_NAMESPACES = ("at::", "c10::", "torch::", "triton")


_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def kernel_base_name(name: str) -> str:
    """``void (anonymous namespace)::relu_kernel<4>(float*)`` -> ``relu_kernel``."""
    text = name.strip()
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):  # drop the parameter list: the first '(' at template depth 0
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and not text.startswith("(anonymous", i):
            cut = i
            break
    head = text[:cut]
    while True:  # strip nested template arguments; an unbalanced '<' (operator<<) stays
        stripped = _TEMPLATE_ARGS.sub("", head)
        if stripped == head:
            break
        head = stripped
    head = head.split()[-1] if head.split() else head
    return head.split("::")[-1]


def kernel_qualified_name(name: str) -> str:
    head = name.split("(")[0] if not name.startswith("(") else name
    return head.split()[-1] if head.split() else head


def source_kernel_names(solution_dir: str | None) -> set[str]:
    names: set[str] = set()
    if not solution_dir:
        return names
    for path in Path(solution_dir, "kernels").rglob("*"):
        if path.is_file() and path.suffix in (".cu", ".cuh", ".cpp", ".h", ".hpp"):
            text = strip_cpp_comments(path.read_text(encoding="utf-8", errors="replace"))
            names.update(m.group(1) for m in GLOBAL_FN.finditer(text))
    return names


def extension_function_names(extension_path: str | None) -> set[str]:
    """Base names of functions defined in the built extension (``nm -C --defined-only``)."""
    if not extension_path or not Path(extension_path).exists():
        return set()
    try:
        out = subprocess.run(["nm", "-C", "--defined-only", extension_path], capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    names = set()
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] in "TtWw":
            names.add(kernel_base_name(parts[2]))
    return names


def classify_kernels(kernels: set[str], own: set[str], allow_cublas: bool, allow_cudnn: bool) -> list[str]:
    """The kernel names that are neither the candidate's nor allowed."""
    bad = []
    for name in sorted(kernels):
        if ALWAYS_ALLOWED.search(name):
            continue
        qualified = kernel_qualified_name(name)
        foreign_ns = any(ns in qualified for ns in FOREIGN_NAMESPACES)
        if not foreign_ns and kernel_base_name(name) in own:
            continue
        if allow_cublas and not foreign_ns and CUBLAS_KERNELS.search(name):
            continue
        if allow_cudnn and not foreign_ns and CUDNN_KERNELS.search(name):
            continue
        bad.append(name)
    return bad


class KernelProvenance(GuardBase):
    name = "kernel-provenance"

    def check_observations(self, obs: Any, info: RunInfo) -> list[Violation]:
        if info.device != "cuda" or not obs.kernels:
            return []
        allow = (info.allow_cublas and self.options.allow_cublas, info.allow_cudnn and self.options.allow_cudnn)
        bad = classify_kernels(set(obs.kernels), source_kernel_names(info.solution_dir), *allow)
        if bad:  # the symbol table is large (torch's inline templates): read it only when needed
            bad = classify_kernels(set(bad), extension_function_names(info.extension_path), *allow)
        return [self.violation(f"kernel {name[:200]}", "launched during ModelNew.forward but not defined "
                               "in the solution's kernels/ nor an allowed library") for name in bad]


@hookimpl
def kag_register_guards(register) -> None:
    register("kernel-provenance", KernelProvenance)
