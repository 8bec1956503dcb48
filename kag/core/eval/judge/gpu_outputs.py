"""The judge's half of reading a window's GPU outputs without the candidate: ``parse`` what the
candidate said of them (kag.core.eval.candidate.gpu_outputs, whose docstring tells both halves)
and ``SegmentReader``, which maps each allocation once and copies an output's bytes into the
judge's memory while the candidate is stopped. Trusted side (the judge).
"""

from __future__ import annotations

from typing import Any

from kag.core.eval.candidate.gpu_outputs import COUNT, ENTRY, SEGMENT, UNREADABLE, CudaApi


def parse(tail: bytes) -> tuple[list[tuple[int, int, int, tuple[int, ...]]], list[tuple[int, int, bytes]]]:
    """The judge's reading of ``OutputDescriber.take``'s bytes: (index, dims, offset, strides) entries and the
    new allocations (index, size, handle)."""
    (n,) = COUNT.unpack_from(tail, 0)
    pos = COUNT.size
    entries = []
    for _ in range(n):
        index, dims, offset, *strides = ENTRY.unpack_from(tail, pos)
        entries.append((index, dims, offset, tuple(strides[:dims])))
        pos += ENTRY.size
    (m,) = COUNT.unpack_from(tail, pos)
    pos += COUNT.size
    fresh = [SEGMENT.unpack_from(tail, pos + k * SEGMENT.size) for k in range(m)]
    return entries, [(i, size, handle) for i, size, handle in fresh]


class SegmentReader:
    """The judge's half: the candidate's allocations mapped once, outputs copied out of them."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.api = CudaApi()
        self.mapped: dict[int, tuple[int, int]] = {}  # index -> (pointer here, size)

    def add(self, fresh: list[tuple[int, int, bytes]]) -> None:
        for index, size, handle in fresh:
            if index in self.mapped:
                continue  # an index is told once; a second telling is ignored
            self.mapped[index] = (self.api.ipc_open(handle), size)

    def read(self, entry: tuple[int, int, int, tuple[int, ...]], like: Any) -> Any:
        """A copy, in the judge's memory, of the output ``entry`` describes, shaped and typed as
        ``like`` (the reference's tensor); a string saying why when the entry does not describe one
        (unreadable, another shape, out of its allocation's bounds)."""
        import torch

        found = self._bytes(entry, like)
        if isinstance(found, str):
            return found
        raw, strides = found
        own = raw.clone()  # the judge's copy, taken while the candidate is stopped
        torch.cuda.synchronize()
        return own.view(like.dtype).as_strided(tuple(like.shape), strides)

    def read_at(self, entry: tuple[int, int, int, tuple[int, ...]], like: Any, positions: Any) -> Any:
        """The values of the output ``entry`` describes at ``positions`` (flat, in ``like``'s
        logical order), copied into the judge's memory; a string as ``read`` says. Reads only
        those elements: a re-check of a large output costs the gap a gather, not a copy."""
        import torch

        from kag.core.eval.judge.output_samples import element_offsets

        found = self._bytes(entry, like)
        if isinstance(found, str):
            return found
        raw, strides = found
        item = like.element_size()
        if raw.data_ptr() % item:  # not on an element: copy it whole (as ``read``), then pick
            whole = self.read(entry, like)
            return whole if isinstance(whole, str) else whole.reshape(-1)[positions]
        usable = raw[: raw.numel() - raw.numel() % item]
        values = usable.view(like.dtype)[element_offsets(positions, tuple(like.shape), strides)]
        torch.cuda.synchronize()
        return values

    def _bytes(self, entry: tuple[int, int, int, tuple[int, ...]], like: Any) -> Any:
        """The candidate's bytes ``entry`` points at (a tensor over them, not a copy) and the
        strides, after the checks every read makes; a string saying why not."""
        import torch

        index, dims, offset, strides = entry
        if index == UNREADABLE:
            return "the candidate could not say where it is (not a CUDA tensor PyTorch allocated?)"
        if index not in self.mapped:
            return f"it is in an allocation ({index}) the candidate never shared"
        if dims != like.dim():
            return f"it has {dims} dimensions, the reference's {like.dim()}"
        base, size = self.mapped[index]
        item = like.element_size()
        if any(s < 0 for s in strides):
            return "negative strides"
        span = (1 + sum((n - 1) * s for n, s in zip(like.shape, strides))) * item if like.numel() else 0
        if offset < 0 or offset + span > size:
            return f"it runs past its allocation ({offset} + {span} > {size} bytes)"
        raw = torch.as_tensor(_Cai(base + offset, span), device=self.device)  # bytes of the candidate's
        return raw, tuple(strides)

    def close(self) -> None:
        for ptr, _ in self.mapped.values():
            try:
                self.api.ipc_close(ptr)
            except Exception:  # noqa: BLE001
                pass
        self.mapped.clear()


class _Cai:
    """A byte range of device memory, for ``torch.as_tensor`` (the CUDA array interface)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3,
                                         "strides": None}
