"""The fatbin wall: PyTorch's own CUDA kernels cannot run in a candidate process.

Applied by the candidate's harness on itself during ``prepare``, before any solution code exists
there (so the code that raises it is still the evaluator's). CUDA loads a kernel's code lazily,
from the ``.nv_fatbin`` section of the library that registered it, the first time the kernel is
launched. The wall maps read-only pages over that section of every loaded library with GPU code
(libtorch_cuda.so, cuSPARSE, cuRAND, NCCL, ...) except the libraries the task's policy allows
(cuBLAS for GEMM, cuDNN for conv) and NVRTC, after the kernels the harness and a model's
construction need have been loaded (fills, random initialisation, arange). From then on every
other PyTorch CUDA kernel fails to load ("device kernel image is invalid"), whoever launches it:
a Python op, a C++ ``at::cuda::`` or ``at::native::`` call, ``redispatch``, a function pointer found
with ``dlsym``, an operator run with RecordFunction switched off. The bytes are gone from this
process; the files they came from are unreadable to it (kag.core.trust.isolation leaves them out of
Landlock's read rules), so they cannot be loaded again. For the same reason the candidate cannot read
where in those files the GPU code lies: the judge reads it (``fatbin_sections``) and hands it over,
and a library found neither there nor in a readable file stops the wall (it once skipped every
library this way and covered none: bench/results/2026-11-26-63829ef-h100-h200). Measured on an H100 (2026-11-26,
bench/results/2026-11-26-90fca86-h100): fills ran, relu/add/sum failed, a cuBLAS matmul and an
NVRTC kernel of the process's own ran; raising the wall took 55 ms.

The solution's own extension is imported after the wall, so its kernels load as usual.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import re
import struct
import sys
from typing import Any, Iterable

from kag.core.trust.provenance import HARNESS_LIBRARIES

FATBIN = ".nv_fatbin"
CUBLAS = re.compile(r"^libcublas(Lt)?\.so")
CUDNN = re.compile(r"^libcudnn")
# The profiler that records every call's kernels (CUPTI), the CUDA runtime's own helpers, and the driver
# (libcuda, and the parts it loads when it needs them, libnvidia-ptxjitcompiler for a solution's PTX): none
# is PyTorch's. NVRTC keeps its sections too (kag.core.trust.nvrtc_wall takes its code away).
ALWAYS_ALLOWED = re.compile(r"^(libnvrtc|libcupti|libnvperf|libnvJitLink|libcudart|libnvToolsExt|libpc_sampling"
                            r"|libcuda\.so|libnvidia-)")
# NVRTC, the C++ compiler PyTorch's run-time-compiled ops (the "jiterator": special.bessel_j0, the
# orthogonal polynomials, airy_ai, ...) are built with: their source text is in libtorch_cuda, not its
# .nv_fatbin, so they run behind the wall unless the compiler is gone (bench/results/2026-11-27-d2e8051-h100:
# five of them ran on an H100). Every file of it, shared or static (libcaffe2_nvrtc is torch's shim).
NVRTC = re.compile(r"^lib(caffe2_)?nvrtc")
# Archives a library can travel in (a wheel in a local package store, a conda package, a .deb): a
# candidate could unpack libnvrtc or libtorch_cuda from one into memory and load a fresh copy (an
# independent review did it with a wheel under /opt and memfd_create). None is needed to run a solution.
ARCHIVE = re.compile(r"\.(whl|zip|egg|jar|tar|tgz|tbz2|txz|conda|deb|rpm|7z)$|\.tar\.(gz|bz2|xz|zst|lz4)$", re.I)
PROT_READ = 1
MAP_SHARED, MAP_FIXED = 0x01, 0x10
F_SEAL_ALL = 0x0001 | 0x0002 | 0x0004 | 0x0008  # F_SEAL_SEAL, SHRINK, GROW, WRITE


def elf_sections(path: str) -> list[tuple[str, int, int, int]] | None:
    """(name, flags, virtual address, size) of every section of the 64-bit ELF file at ``path``, None
    if it is not such a file (or cannot be read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
                return None
            shoff, = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
            if not shoff or not shnum or shstrndx >= shnum or shentsize < 64:
                return None
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            if len(table) < shentsize * shnum:
                return None
            secs = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
            f.seek(secs[shstrndx][4])
            names = f.read(secs[shstrndx][5])
    except OSError:
        return None
    out = []
    for sh_name, _type, flags, addr, _offset, size in secs:
        end = names.find(b"\0", sh_name)
        out.append((names[sh_name:end].decode("latin-1"), flags, addr, size))
    return out


def elf_section(path: str, name: str = FATBIN) -> tuple[int, int] | None:
    """(virtual address, size) of section ``name`` of the 64-bit ELF file at ``path``, None if it
    has none (or is not such a file)."""
    for sec_name, _flags, addr, size in elf_sections(path) or []:
        if sec_name == name and size:
            return addr, size
    return None


SHF_EXECINSTR = 0x4


def code_sections(path: str) -> list[list[int]]:
    """(virtual address, size) of every section of the ELF file at ``path`` that holds machine code."""
    return [[addr, size] for _name, flags, addr, size in elf_sections(path) or [] if flags & SHF_EXECINSTR and size]


def mapped_libraries() -> dict[str, int]:
    """Each shared library mapped in this process and its load base (where file offset 0 is)."""
    bases: dict[str, int] = {}
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.rstrip("\n").split(None, 5)  # a path may hold spaces
            if len(parts) < 6:
                continue
            path = parts[5].removesuffix(" (deleted)")  # replaced on disk since it was loaded: found by its name
            if not (path.endswith(".so") or ".so." in path):
                continue
            if HARNESS_LIBRARIES.get(path) == (parts[3], int(parts[4])):
                continue  # the judge's own (kag's operator counter: host code only, in a folder the candidate cannot see)
            if int(parts[2], 16) == 0 and path not in bases:
                bases[path] = int(parts[0].split("-")[0], 16)
    return bases


def allowed(path: str, allow_cublas: bool, allow_cudnn: bool) -> bool:
    """Whether the library at ``path`` keeps its GPU code (the task's policy, and NVRTC)."""
    base = os.path.basename(path)
    return bool(ALWAYS_ALLOWED.match(base) or (allow_cublas and CUBLAS.match(base))
                or (allow_cudnn and CUDNN.match(base)))


def preload(device: str) -> None:
    """Load the PyTorch kernels a candidate may still run after the wall: fills and zeros of every
    common dtype (the harness's poison and null window, zeroed accumulators), and what a model's
    construction on the device runs (uniform_/normal_ initialisation, arange)."""
    import torch

    ints = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)
    floats = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
    for dt in floats + ints:
        t = torch.empty(8, dtype=dt, device=device)
        t.fill_(1)
        t.zero_()
        torch.zeros(8, dtype=dt, device=device)
        torch.ones(8, dtype=dt, device=device)
        torch.full((8,), 1, dtype=dt, device=device)
    for dt in floats:
        torch.empty(8, dtype=dt, device=device).uniform_()
        torch.empty(8, dtype=dt, device=device).normal_()
        torch.rand(8, dtype=dt, device=device)
        torch.randn(8, dtype=dt, device=device)
    for dt in (torch.int64, torch.int32, torch.float32):
        torch.arange(8, dtype=dt, device=device)
    torch.cuda.synchronize()


def wall_section(path: str, sections: dict[str, Any] | None = None) -> tuple[int, int] | None:
    """Where the GPU code of the mapped library ``path`` lies, from ``sections`` (real path ->
    (address, size), read by the judge: the candidate cannot read these files once Landlock is on)
    or from the file itself. Raises OSError when the file cannot be read and ``sections`` does not
    know it: a library whose code cannot be found must not be skipped (the candidate walled 0
    libraries on an H100 that way, and PyTorch's kernels ran)."""
    real = os.path.realpath(path)
    known = (sections or {}).get(real)
    if known is not None:
        return (int(known[0]), int(known[1])) if known else None
    with open(real, "rb"):  # raises where Landlock (or anything else) denies it
        pass
    return elf_section(real)


def raise_wall(allow_cublas: bool = True, allow_cudnn: bool = True,
               sections: dict[str, Any] | None = None, sealed: bool = True) -> list[str]:
    """Map read-only pages (``cover``) over the GPU code of every loaded library the policy does not
    allow (bytes of other sections sharing the first and last page are kept). ``sections``: see
    ``wall_section``; ``sealed``: ``seal`` them (off only to show, in a test, what sealing stops).
    Returns the names of the libraries walled; raises OSError when a library's code cannot be found
    or a mapping fails (the candidate must not go on)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    walled = []
    for path, base in sorted(mapped_libraries().items()):
        if allowed(path, allow_cublas, allow_cudnn):
            continue
        try:
            found = wall_section(path, sections)
        except OSError as exc:
            raise OSError(exc.errno, f"the fatbin wall could not read {path} to find its GPU code: {exc.strerror}") from exc
        if found is None:
            continue
        addr, size = base + found[0], found[1]
        lo, hi = addr // page * page, (addr + size + page - 1) // page * page
        keep_lo = ctypes.string_at(lo, addr - lo)
        keep_hi = ctypes.string_at(addr + size, hi - addr - size)
        cover(libc, lo, hi - lo, PROT_READ, {0: keep_lo, addr + size - lo: keep_hi}, f"the fatbin wall, {path}")
        SEALED[os.path.basename(path)] = sealed and seal(libc, lo, hi - lo)
        walled.append(os.path.basename(path))
    return walled


def cover(libc: Any, lo: int, size: int, prot: int, keep: dict[int, bytes], what: str) -> None:
    """Map ``size`` bytes at ``lo`` (page-aligned) that read as zeros but for ``keep`` (offset -> bytes),
    with ``prot`` (read-only or nothing), from a memory file sealed against writing, shared. Such a
    mapping cannot become writable, and the kernel's forced writes (``/proc/self/mem``, ptrace), which
    pass both the protection and ``mseal`` of a private mapping, fail on it: the candidate cannot put
    GPU code it brought itself back here. The file is sparse (holes cost no memory until read)."""
    import fcntl

    fd = os.memfd_create("kag-wall", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        for offset, data in keep.items():
            if data and os.pwrite(fd, data, offset) != len(data):
                raise OSError(5, f"{what}: a short write to the covering file")
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, F_SEAL_ALL)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        got = libc.mmap(lo, size, prot, MAP_SHARED | MAP_FIXED, fd, 0)
        if got != lo:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: could not cover the pages: {os.strerror(err)}")
    finally:
        os.close(fd)


SEALED: dict[str, bool] = {}  # library -> whether its walled pages are sealed (mseal: Linux 6.10+)
MSEAL = {"x86_64": 462, "aarch64": 462}


def seal(libc: Any, addr: int, size: int) -> bool:
    """Seal the walled pages (``mseal``): from then on no ``mprotect``, ``munmap``, ``mremap`` or
    ``MAP_FIXED`` mapping can change them, so GPU code the solution brings itself (bytes of the
    library built into its own module with ``.incbin``, read from a copy the scan missed, or from a
    cuBLAS the task forbids) cannot be written back over them. False where the kernel has no mseal
    (before 6.10): the seccomp filter's refusal of mremap and Landlock's unreadable files remain."""
    import platform

    nr = MSEAL.get(platform.machine())
    if nr is None:
        return False
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(nr), ctypes.c_void_p(addr), ctypes.c_size_t(size), ctypes.c_ulong(0)) == 0


WALLED_ERROR = re.compile(r"device kernel image is invalid|cudaErrorInvalidKernelImage|no kernel image is available")
WALLED_HINT = ("PyTorch's own CUDA kernels cannot run in a solution (only its fills and random initialisation, "
               "cuBLAS and cuDNN where the task allows them, and the solution's own kernels): a call of forward "
               "or ModelNew's construction launched one")


def explain(message: str) -> str:
    """An error a walled kernel caused, with what it means (others unchanged)."""
    return f"{WALLED_HINT}: {message}" if WALLED_ERROR.search(message) and WALLED_HINT not in message else message


# ---------------------------------------------------------------------------------------------
# the files the wall's bytes come from: kept out of the candidate's reach (Landlock)
def library_roots() -> list[str]:
    """Every folder a candidate may read (kag.core.trust.confine.system_read_paths: /usr, /opt, /lib,
    this interpreter, its import path, CUDA): a copy of a library with GPU code anywhere there could be
    loaded fresh, its code intact. Only site-packages and the CUDA toolkit were scanned before, so a
    copy under /usr/lib, /opt or a conda prefix stayed readable."""
    from kag.core.trust.confine import system_read_paths

    roots = [os.path.realpath(p) for p in system_read_paths()]
    roots += [os.path.realpath(os.path.join(c, d)) for c in ("/usr/local/cuda", os.environ.get("CUDA_HOME") or "")
              if c for d in ("lib64", "targets")]
    return sorted({r for r in roots if os.path.isdir(r) and not r.startswith(("/proc", "/sys", "/dev", "/etc"))})


def _outermost(roots: Iterable[str]) -> list[str]:
    """``roots`` less those inside another (each tree is scanned once)."""
    out: list[str] = []
    for root in sorted(roots):
        if not any(root == o or root.startswith(o.rstrip("/") + "/") for o in out):
            out.append(root)
    return out


def _scan(roots: Iterable[str]) -> tuple[dict[str, list[int]], dict[str, list[list[int]]], list[str]]:
    """The libraries with GPU code (real path -> ``.nv_fatbin``'s address and size), NVRTC's files
    (real path -> the address and size of each of its sections of machine code), and archives."""
    found: dict[str, list[int]] = {}
    compilers: dict[str, list[list[int]]] = {}
    archives: list[str] = []
    # an archive on or under the import path is Python's own or a package's data (ensurepip's wheels, test
    # data): hiding it would make its folders unlistable, and Python finds modules by listing folders
    importable = tuple(os.path.realpath(p) for p in sys.path if p and os.path.isabs(p))
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]  # a library in tests/ or include/ loads too
            for name in filenames:
                path = os.path.join(dirpath, name)
                if NVRTC.match(name) and os.path.isfile(path) and not os.path.islink(path):
                    compilers[path] = code_sections(path) if (name.endswith(".so") or ".so." in name) else []
                elif ARCHIVE.search(name) and not os.path.islink(path) \
                        and not any(path == p or path.startswith(p.rstrip("/") + "/") for p in importable):
                    archives.append(path)
                if (name.endswith(".so") or ".so." in name) and not name.endswith(".py"):
                    if os.path.isfile(path) and not os.path.islink(path):
                        section = elf_section(path)
                        if section is not None:
                            found[path] = list(section)
    return dict(sorted(found.items())), dict(sorted(compilers.items())), sorted(archives)


def library_scan(cache_dir: str | None = None) -> dict[str, Any]:
    """Every library file under ``library_roots()`` with GPU code (``sections``: real path -> address
    and size of its ``.nv_fatbin``), every file of NVRTC (``compilers``: real path -> where its
    machine code lies, for kag.core.trust.nvrtc_wall) and every archive (``archives``, ``ARCHIVE``).
    Read by the judge: the
    candidate raises the wall after Landlock has made these files unreadable to it. The scan (a few
    seconds on a full CUDA environment) is cached in the evaluator's cache, keyed by the modification
    times of the roots, their folders, and the folders that held such a file (a reinstall rewrites those)."""
    roots = library_roots()
    stamp: dict[str, Any] = {r: _tree_stamp(r) for r in roots}
    cache = os.path.join(cache_dir, "fatbin_sections.json") if cache_dir else None
    if cache:
        try:
            with open(cache) as f:
                data = json.load(f)
            held = {str(k): list(v) for k, v in data["sections"].items()}
            compilers = {str(k): [list(r) for r in v] for k, v in data["compilers"].items()}
            archives = [str(p) for p in data["archives"]]
            if data.get("stamp") == stamp and data.get("holders") == _holder_stamp([*held, *compilers, *archives]):
                return {"sections": held, "compilers": compilers, "archives": archives}
        except (OSError, ValueError, KeyError, AttributeError, TypeError):
            pass
    sections, compilers, archives = _scan(_outermost(roots))
    if cache:
        try:
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            tmp = f"{cache}.{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump({"stamp": stamp, "holders": _holder_stamp([*sections, *compilers, *archives]),
                           "sections": sections, "compilers": compilers, "archives": archives}, f)
            os.replace(tmp, cache)
        except OSError:
            pass
    return {"sections": sections, "compilers": compilers, "archives": archives}


def fatbin_sections(cache_dir: str | None = None) -> dict[str, list[int]]:
    """Every library file under ``library_roots()`` with GPU code, real path -> (address, size) of
    its ``.nv_fatbin`` section (``library_scan``)."""
    return library_scan(cache_dir)["sections"]


def archive_files(cache_dir: str | None = None) -> list[str]:
    """Every archive under ``library_roots()`` but those on or under the import path (``library_scan``): kept
    from a CUDA candidate and a CUDA build like NVRTC's files, since a library can be unpacked from one."""
    return list(library_scan(cache_dir)["archives"])


def compiler_files(cache_dir: str | None = None) -> list[str]:
    """Every file of NVRTC under ``library_roots()``, shared or static (``library_scan``): kept from
    the candidate (Landlock) and from a build whose solution could embed one (``.incbin``)."""
    return list(library_scan(cache_dir)["compilers"])


def fatbin_files(allow_cublas: bool = True, allow_cudnn: bool = True, cache_dir: str | None = None) -> list[str]:
    """Every library file under ``library_roots()`` with GPU code the policy does not allow, real
    paths (``fatbin_sections``)."""
    return [p for p in fatbin_sections(cache_dir) if not allowed(p, allow_cublas, allow_cudnn)]


def _tree_stamp(root: str) -> list[Any]:
    """The modification times of ``root`` and its package folders (an install changes them)."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
        return [os.stat(root).st_mtime_ns] + [[e.name, e.stat().st_mtime_ns] for e in entries if e.is_dir()]
    except OSError:
        return []


def _holder_stamp(paths: Iterable[str]) -> list[Any]:
    """The modification times of the folders holding the files found (a reinstall of torch or of a
    CUDA package replaces files there)."""
    out = []
    for folder in sorted({os.path.dirname(p) for p in paths}):
        try:
            out.append([folder, os.stat(folder).st_mtime_ns])
        except OSError:
            out.append([folder, None])
    return out
