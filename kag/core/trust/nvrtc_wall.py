"""NVRTC out of a candidate's reach, so PyTorch's run-time-compiled CUDA ops cannot run there either.

Applied by the candidate's harness on itself during ``prepare``, before any solution code exists
there (so this is still the evaluator's code), beside the fatbin wall (kag.core.trust.fatbin_wall).
Some PyTorch CUDA ops are not in any ``.nv_fatbin``: ATen compiles them from source text kept in
libtorch_cuda with NVRTC the first time they run (the "jiterator": ``special.bessel_j0``, the
orthogonal polynomials, ``airy_ai``, ...), so they ran behind the wall (an H100,
bench/results/2026-11-27-d2e8051-h100). Importing a CUDA torch preloads NVRTC, so keeping its files
unreadable is not enough: ``close_compiler`` replaces the machine code of the NVRTC the process has
mapped with sealed pages nothing may read or run, Landlock keeps every NVRTC file unreadable (``compiler_files``),
and a CUDA build reads none of them (a solution cannot embed one with ``.incbin``).

cuDNN needs NVRTC for its convolutions (on an H200 every cuDNN convolution tried ended the process
once it was closed: bench/results/2026-11-27-60c254e-h200), so NVRTC stays where the task may use
cuDNN: the paper's policy is "cuDNN for conv", and a task whose reference has no convolution or RNN
gets neither cuDNN nor NVRTC. There the run-time-compiled ops still run (a hole, in the README).
A solution's own kernels never need NVRTC in the candidate: the nvrtc backend compiles them in the build.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import re
from typing import Any

from kag.core.trust.fatbin_wall import (NVRTC, PROT_READ, SEALED, cover,
                                        mapped_libraries, seal)

# what in a task's reference runs on cuDNN: convolutions (any dimension, transposed, lazy) and RNNs
CUDNN_OPS = re.compile(r"[Cc]onv(_?[Tt]ranspose)?[123]d|[Cc]onvolution|\b(LSTM|GRU|RNN)(Cell)?\b|cudnn")
CLOSED_HINT = ("one cause, where the task has no convolution: a PyTorch op compiled at run time (the jiterator: "
               "torch.special's Bessel functions and polynomials, airy_ai, ...) or cuDNN, for a solution's process "
               "has no NVRTC there")


def task_uses_cudnn(reference_code: str) -> bool:
    """Whether the task's reference may run on cuDNN (the paper: cuDNN for conv), read from its source."""
    return bool(CUDNN_OPS.search(reference_code or ""))


def close_compiler(code: dict[str, list[list[int]]], sealed: bool = True) -> list[str]:
    """Take away the machine code of NVRTC where this process has it mapped (importing a CUDA torch
    preloads it): its executable mappings become read-only and every section of code in them
    (``code``: real path -> address and size of each, from the judge's scan, ``compiler_files``: the
    candidate cannot read these files) is replaced by pages nothing may read or run, sealed like the
    fatbin wall. The rest stays readable: the dynamic linker reads NVRTC's symbol tables whenever a
    library is loaded (covering the whole mapping ended every candidate at its next ``dlopen``). A
    run-time-compiled PyTorch op then stops where it would compile (SIGSEGV), and the files are
    unreadable, so NVRTC cannot be loaded afresh. Returns the libraries closed; raises OSError where
    a library's code is unknown or a mapping fails (the candidate must not go on)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    closed: list[str] = []
    ranges = code_ranges(NVRTC)
    for path, base in sorted(mapped_libraries().items()):
        if not NVRTC.match(os.path.basename(path)):
            continue
        sections = code.get(os.path.realpath(path))
        if sections is None:
            raise OSError(errno.ENOENT, f"NVRTC is loaded from {path}, which the judge's scan does not know: "
                                        "its code cannot be found to take it away")
        mine = [(lo, hi) for lo, hi, p in ranges if p == path]
        for lo, hi in mine:
            _call(libc.mprotect(lo, hi - lo, PROT_READ), f"could not make NVRTC's code in {path} read-only")
        for addr, size in sections:
            _blank(libc, base + addr, base + addr + size, path)
        name = os.path.basename(path)
        SEALED[name] = all(sealed and seal(libc, lo, hi - lo) for lo, hi in mine)
        closed.append(name)
    return closed


def _blank(libc: Any, start: int, end: int, path: str) -> None:
    """Pages nothing may read or run over [start, end); bytes outside it on the first and last page
    kept, read-only. Both from a write-sealed memory file (``fatbin_wall.cover``): not even the
    kernel's forced writes through /proc/self/mem can put code there."""
    page = mmap.PAGESIZE
    inner_lo, inner_hi = -(-start // page) * page, end // page * page
    what = f"could not cover NVRTC's code in {path}"
    if inner_lo < inner_hi:
        cover(libc, inner_lo, inner_hi - inner_lo, 0, {}, what)
    for edge in sorted({start // page * page, (end - 1) // page * page}):
        if inner_lo <= edge < inner_hi:
            continue
        kept = bytearray(ctypes.string_at(edge, page))
        lo, hi = max(start, edge) - edge, min(end, edge + page) - edge
        kept[lo:hi] = bytes(hi - lo)
        cover(libc, edge, page, PROT_READ, {0: bytes(kept)}, what)


def _call(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def code_ranges(pattern: re.Pattern[str]) -> list[tuple[int, int, str]]:
    """(start, end, path) of every executable mapping of a library whose file name matches ``pattern``."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.rstrip("\n").split(None, 5)
            if len(parts) < 6 or "x" not in parts[1]:
                continue
            path = parts[5].removesuffix(" (deleted)")  # a path may hold spaces
            if pattern.match(os.path.basename(path)):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi, path))
    return out


def explain_crash(message: str, layers: list[str]) -> str:
    """A candidate's SIGSEGV, where NVRTC was closed in it, with what may have caused it."""
    if "SIGSEGV" in message and any(layer.startswith("NVRTC closed") for layer in layers):
        return f"{message} ({CLOSED_HINT})"
    return message
