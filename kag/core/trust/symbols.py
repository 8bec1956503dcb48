"""Provenance by symbols: what a built extension imports from PyTorch, against an allow-list.

Trusted side (the orchestrator, after the build; a static check, so ``--no-static-guards`` turns it
off and the runtime defences alone must hold: kag.core.trust.fatbin_wall, kag.core.trust.provenance).
The undefined dynamic symbols of ``cuda_extension*.so`` are read from its ELF symbol table, not from
the sources, so a namespace alias, a macro or a generated name changes nothing. A kernel binding
needs allocation (``at::_ops::empty*::call`` and the other allocation, fill and view operators),
tensor metadata (``at::TensorBase``, ``c10::``), streams and handles (``c10::cuda::``, cuBLAS's and
cuDNN's handle where the task allows them), error checks and the Python glue. Everything else of
ATen's is refused: ``at::_ops::X::call`` and ``redispatch`` of a computing operator, ``at::cpu::``,
``at::cuda::``, ``at::native::``, ``at::meta::``, the composite namespaces, ``at::redispatch::``,
RecordFunction's switches, the dispatcher itself; and ``dlsym`` and its kin (a pointer found at
run time leaves no symbol of its own).
"""

from __future__ import annotations

import re
import struct
from typing import BinaryIO, Iterable

DYNAMIC_LOADER = frozenset({"dlsym", "dlvsym", "dlopen", "dlmopen", "dl_iterate_phdr", "dladdr", "dladdr1", "dlinfo",
                            "_dl_sym", "_dl_vsym", "__libc_dlsym", "__libc_dlopen_mode"})
# ATen's namespaces of functions that compute (a backend's kernels, the dispatcher's entry points)
COMPUTE_NAMESPACES = frozenset({"cpu", "cuda", "native", "meta", "redispatch", "compositeexplicitautograd",
                                "compositeimplicitautograd", "compositeexplicitautogradnonfunctional",
                                "compositeimplicitautogradnestedtensor", "sparsecpu", "sparsecuda", "mkldnn",
                                "quantizedcpu", "quantizedcuda", "nestedtensorcpu", "nestedtensorcuda", "functionalization",
                                "_ops", "TensorIteratorBase", "TensorIterator", "TensorIteratorConfig",
                                "RecordFunction", "RecordFunctionGuard", "enableRecordFunction", "DisableRecordFunctionGuard",
                                "addThreadLocalCallback", "addGlobalCallback", "clearCallbacks", "jit"})
HANDLES_CUBLAS = frozenset({"getCurrentCUDABlasHandle", "getCurrentCUDABlasLtHandle", "getCUDABlasLtWorkspace",
                            "getCUDABlasLtWorkspaceSize", "getChosenWorkspaceSize", "getCurrentCUDABlasLtWorkspace"})
CUDA_METADATA = frozenset({"getCurrentDeviceProperties", "getDeviceProperties", "warp_size", "getCurrentCUDAStream",
                           "getDefaultCUDAStream", "getStreamFromPool", "setCurrentCUDAStream", "device_count",
                           "current_device", "is_available", "getCUDAHooks", "CUDAStream", "detail"})
HANDLES_CUDNN = frozenset({"getCudnnHandle"})
C10_REFUSED = frozenset({"Dispatcher", "OperatorHandle", "TypedOperatorHandle", "BoxedKernel", "KernelFunction"})
# allocation, fills and views are what a binding may run of PyTorch's (kag.core.trust.torch_ops' list)
OVERLOADS = frozenset({"", "memory_format", "names", "Scalar", "Tensor", "int", "Dimname", "SymInt", "dtype", "out",
                       "self", "sizes", "size", "default", "using_ints", "using_sizes", "Tensor_list", "dim", "dims"})


def allowed_op_struct(name: str) -> bool:
    """Whether ``at::_ops::<name>`` is an allocation, fill, view or metadata operator (name is the
    operator's, then ``_<overload>`` when it has one)."""
    from kag.core.trust.torch_ops import ALLOWED_OPS

    for op in ALLOWED_OPS:
        if name == op or (name.startswith(op + "_") and name[len(op) + 1:] in OVERLOADS):
            return True
    return False


def mangled_path(symbol: str, limit: int = 4) -> list[str]:
    """The first source names of an Itanium-mangled nested name: ``_ZN2at4_ops4relu4callE...`` ->
    ``["at", "_ops", "relu", "call"]``; operators give ``<op:xx>``; [] for other symbols."""
    if symbol.startswith("_ZN"):
        i = 3
        while i < len(symbol) and symbol[i] in "KVrLR":  # cv and ref qualifiers of a member function
            i += 1
    elif symbol.startswith("_Z"):
        i = 2
    else:
        return []
    out: list[str] = []
    while i < len(symbol) and len(out) < limit:
        if symbol[i].isdigit():
            j = i
            while j < len(symbol) and symbol[j].isdigit():
                j += 1
            n = int(symbol[i:j])
            out.append(symbol[j:j + n])
            i = j + n
        elif symbol[i] in "CD" and i + 1 < len(symbol) and symbol[i + 1].isdigit():  # a constructor or destructor
            out.append(f"<{symbol[i:i + 2]}>")
            i += 2
        elif symbol[i].islower() and i + 1 < len(symbol) and symbol[i + 1].islower():
            out.append(f"<op:{symbol[i:i + 2]}>")
            i += 2
        else:
            break
    return out


def why_refused(symbol: str, allow_cublas: bool = True, allow_cudnn: bool = True) -> str | None:
    """Why a solution's module may not import ``symbol``, or None when it may."""
    if symbol in DYNAMIC_LOADER:
        return "looks functions up at run time (a pointer from it leaves no symbol to check)"
    if symbol.startswith("THP"):
        return None
    path = mangled_path(symbol)
    if not path:
        return None
    top = path[0]
    if top == "at":
        second = path[1] if len(path) > 1 else ""
        if second == "_ops":
            op = path[2] if len(path) > 2 else ""
            entry = path[3] if len(path) > 3 else ""
            if entry == "call" and allowed_op_struct(op):
                return None
            return f"calls PyTorch's operator {op} ({entry or 'its entry point'})"
        if second == "cuda":
            name = path[2] if len(path) > 2 else ""
            if name in CUDA_METADATA or (allow_cublas and name in HANDLES_CUBLAS):
                return None
            if name == "blas" or name in HANDLES_CUBLAS:
                return "calls PyTorch's cuBLAS wrappers" if name == "blas" else "takes cuBLAS's handle where the task forbids cuBLAS"
            return f"calls at::cuda::{name} (PyTorch's CUDA kernels)"
        if second == "native":
            name = path[2] if len(path) > 2 else ""
            if allow_cudnn and name in HANDLES_CUDNN:
                return None
            return f"calls at::native::{name} (PyTorch's kernels, below the dispatcher)"
        if second in COMPUTE_NAMESPACES:
            where = f"at::{second}::{path[2]}" if len(path) > 2 else f"at::{second}"
            return f"calls {where} (PyTorch's kernels or its dispatcher)"
        return None
    if top == "c10" and len(path) > 1 and path[1] in C10_REFUSED:
        return f"calls c10::{path[1]} (PyTorch's dispatcher: its operators by name)"
    if top == "torch" and len(path) > 1 and path[1] == "jit":
        return "runs TorchScript"
    return None


def _section_table(f: BinaryIO, path: str) -> tuple[list[tuple], int]:
    """The section headers of the 64-bit little-endian ELF file open as ``f``, and the index of the
    section names' table. Raises ValueError when it is not such a file."""
    head = f.read(64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    return [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)], shstrndx


def dynamic_symbols(path: str, full: bool = False) -> list[tuple[bytes, int, int, int, int]]:
    """(name, st_info, st_shndx, st_value, st_size) of each entry of a 64-bit little-endian ELF file's
    ``.dynsym`` (and, with ``full``, its ``.symtab``, where a library keeps it: the functions it does
    not export), read by seeking (PyTorch's libraries are hundreds of megabytes). Raises ValueError
    when ``path`` is not such a file, OSError when it cannot be read."""
    with open(path, "rb") as f:
        sections, _ = _section_table(f, path)
        out = []
        for _name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
            if sh_type not in ((11, 2) if full else (11,)) or link >= len(sections):  # SHT_DYNSYM, SHT_SYMTAB
                continue
            f.seek(sections[link][4])
            names = f.read(sections[link][5])
            f.seek(offset)
            data = f.read(size)
            if (entsize or 24) != 24:
                raise ValueError(f"{path}: a symbol table with {entsize}-byte entries")
            for st_name, st_info, _other, st_shndx, value, sym_size in struct.iter_unpack("<IBBHQQ", data[:len(data) // 24 * 24]):
                out.append((names[st_name:names.find(b"\0", st_name)], st_info, st_shndx, value, sym_size))
    return out


def plt_sections(path: str) -> list[tuple[int, int]]:
    """(start, end) addresses of a 64-bit little-endian ELF file's PLT sections (``.plt``, ``.plt.sec``,
    ``.plt.got``): stubs that jump to another function, nothing else. Raises as ``dynamic_symbols``."""
    with open(path, "rb") as f:
        sections, shstrndx = _section_table(f, path)
        if shstrndx >= len(sections):
            return []
        f.seek(sections[shstrndx][4])
        names = f.read(sections[shstrndx][5])
    return [(addr, addr + size) for name, _type, _flags, addr, _offset, size, *_ in sections
            if size and names[name:names.find(b"\0", name)] in (b".plt", b".plt.sec", b".plt.got")]


def undefined_symbols(path: str) -> list[str]:
    """The undefined symbols a 64-bit little-endian ELF shared object imports (its .dynsym)."""
    return sorted({name.decode("ascii", "replace") for name, _info, shndx, _value, _size in dynamic_symbols(path)
                   if shndx == 0 and name})


def refused_imports(path: str, allow_cublas: bool = True, allow_cudnn: bool = True) -> list[tuple[str, str]]:
    """(symbol, why) for every import of the module at ``path`` that the allow-list refuses (none
    when it is not an ELF module: then it will not load either)."""
    try:
        imports = undefined_symbols(path)
    except (OSError, ValueError, struct.error, IndexError):
        return []
    return [(s, why) for s in imports if (why := why_refused(s, allow_cublas, allow_cudnn)) is not None]


def demangle(symbols: Iterable[str]) -> dict[str, str]:
    """Readable names where ``c++filt`` is installed (the report's detail); the symbols otherwise."""
    import shutil
    import subprocess

    symbols = list(symbols)
    tool = shutil.which("c++filt")
    if not tool or not symbols:
        return {s: s for s in symbols}
    try:
        out = subprocess.run([tool], input="\n".join(symbols), capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {s: s for s in symbols}
    names = out.splitlines()
    return {s: (names[i] if i < len(names) else s) for i, s in enumerate(symbols)}


SHORT = re.compile(r"\(.*$")
