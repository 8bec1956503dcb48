"""Where a window's GPU outputs are, said by the candidate and read by the judge without it.

Both sides of the boundary take part, each with its own half (the candidate's here, with the wire
format and the CUDA calls both use; the judge's in kag.core.eval.judge.gpu_outputs):

- ``describe_outputs`` runs in the candidate (untrusted) at the end of a window: for each output
  tensor, the CUDA allocation that holds it (``cuMemGetAddressRange``), its offset and strides
  there; for an allocation the judge has not been told of, an IPC handle
  (``cudaIpcGetMemHandle``). No tensor is pickled and no reference is kept for the judge: the
  caching allocator's segments are few and live on from window to window.
- ``SegmentReader`` (kag.core.eval.judge.gpu_outputs) runs in the judge (trusted): it maps each allocation once
  (``cudaIpcOpenMemHandle``) and copies an output's bytes from it into its own memory while the
  candidate is stopped. Offsets and spans are checked against the allocation's size, so a lying
  candidate can only point the judge at its own memory: if what is there is not the output, the
  comparison fails.

So no candidate code runs when an output is read: work put off until an output is asked for has
no moment to run, and nothing tells the candidate which outputs were read.
"""

from __future__ import annotations

import bisect
import ctypes
import struct
from typing import Any, Iterable

MAX_DIMS = 8
ENTRY = struct.Struct("<IIQ" + "q" * MAX_DIMS)  # allocation index, dims, offset (bytes), strides (elements)
SEGMENT = struct.Struct("<IQ64s")  # allocation index, size, IPC handle
COUNT = struct.Struct("<I")
UNREADABLE = 0xFFFFFFFF  # an entry for an output the candidate could not describe
UNREADABLE_ENTRY = ENTRY.pack(UNREADABLE, 0, 0, *([0] * MAX_DIMS))
_PADS = [(0,) * (MAX_DIMS - d) for d in range(MAX_DIMS + 1)]  # the unused strides of a tensor of d dims


def loaded_library(name: str) -> Any:
    """A CUDA library this process already has loaded (the one torch uses): ``name`` is the file
    name up to ``.so`` (``libcuda`` is not ``libcudart``)."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].rsplit("/", 1)[-1].startswith(name + ".so"):
                return ctypes.CDLL(parts[5])
    return ctypes.CDLL(f"{name}.so")


class IpcHandle(ctypes.Structure):
    """``cudaIpcMemHandle_t``: 64 opaque bytes, passed by value (a ctypes array would go as a pointer)."""

    _fields_ = [("reserved", ctypes.c_char * 64)]


class CudaApi:
    """The few CUDA entry points both halves call, through ctypes."""

    def __init__(self) -> None:
        self.rt = loaded_library("libcudart")
        self.drv = loaded_library("libcuda")
        self.rt.cudaIpcGetMemHandle.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_void_p]
        self.rt.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), IpcHandle, ctypes.c_uint]
        self.rt.cudaIpcCloseMemHandle.argtypes = [ctypes.c_void_p]
        self.drv.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                     ctypes.c_uint64]

    def address_range(self, ptr: int) -> tuple[int, int]:
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        rc = self.drv.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr))
        if rc != 0:
            raise RuntimeError(f"cuMemGetAddressRange failed ({rc})")
        return base.value, size.value

    def ipc_handle(self, base: int) -> bytes:
        handle = IpcHandle()
        rc = self.rt.cudaIpcGetMemHandle(ctypes.byref(handle), ctypes.c_void_p(base))
        if rc != 0:
            raise RuntimeError(f"cudaIpcGetMemHandle failed ({rc})")
        return bytes(ctypes.string_at(ctypes.addressof(handle), 64))

    def ipc_open(self, handle: bytes) -> int:
        ptr = ctypes.c_void_p()
        rc = self.rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), IpcHandle.from_buffer_copy(handle), 1)
        if rc != 0:
            raise RuntimeError(f"cudaIpcOpenMemHandle failed ({rc})")
        return int(ptr.value or 0)

    def ipc_close(self, ptr: int) -> None:
        self.rt.cudaIpcCloseMemHandle(ctypes.c_void_p(ptr))


class OutputDescriber:
    """The candidate's half: entries for a window's output tensors, and the allocations it shared."""

    def __init__(self) -> None:
        self.api: CudaApi | None = None
        self.known: dict[int, tuple[int, int]] = {}  # allocation base -> (index, size)
        self.bases: list[int] = []  # the known bases, sorted (each output is looked up in them)
        self.entries: list[bytes] = []  # the window's outputs so far (``add``)
        self.fresh: list[bytes] = []  # ... and the allocations they brought that the judge has not seen

    def find(self, ptr: int) -> int | None:
        """The known allocation holding ``ptr``: a bisection (a linear search over a few hundred
        allocations cost ~20-30 us an output on an H100, in the time of every window's end)."""
        at = bisect.bisect_right(self.bases, ptr) - 1
        if at >= 0:
            base = self.bases[at]
            if ptr < base + self.known[base][1]:
                return base
        return None

    def add(self, tensors: Iterable[Any]) -> None:
        """Entries for one call's output tensors, kept for the window's end (each call describes its
        own output as it returns: at the end, 384 outputs took 2.4 ms on an H100, all of it in the end's
        time)."""
        for t in tensors:
            self.add_tensor(t)

    def add_tensor(self, t: Any) -> None:
        """The entry of one output tensor (a call's usual output, added without ``add``'s loop: this
        runs in every timed call's path)."""
        if not t.is_cuda or t.numel() == 0:
            self.entries.append(UNREADABLE_ENTRY)
            return
        strides = t.stride()
        dims = len(strides)
        if dims > MAX_DIMS:
            self.entries.append(UNREADABLE_ENTRY)
            return
        ptr = t.data_ptr()
        base = self.find(ptr)
        if base is None:
            if self.api is None:
                self.api = CudaApi()
            base, size = self.api.address_range(ptr)
            index = len(self.known)
            self.known[base] = (index, size)
            bisect.insort(self.bases, base)
            self.fresh.append(SEGMENT.pack(index, size, self.api.ipc_handle(base)))
        self.entries.append(ENTRY.pack(self.known[base][0], dims, ptr - base, *strides, *_PADS[dims]))

    def clear(self) -> None:
        """A new window: the entries so far belong to the last one."""
        self.entries, self.fresh = [], []

    def take(self) -> bytes:
        """COUNT + the entries added since ``clear``, then COUNT + the allocations new to the judge
        (with their handles)."""
        out = (COUNT.pack(len(self.entries)) + b"".join(self.entries) + COUNT.pack(len(self.fresh))
               + b"".join(self.fresh))
        self.clear()
        return out
