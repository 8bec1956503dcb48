"""Which dimensions a traced reduction reduces, in terms that views do not change (trusted side).

Decomposed, a LayerNorm, a GroupNorm, an InstanceNorm and a BatchNorm are the same ops (``var``,
``mean``, ``sub``, ``sqrt``, ``div``): they differ only in the dimensions the statistics reduce, which
the op graph (kag.core.data.opgraph) used to drop with the shapes. So a reduction node's label says
which dimensions it reduces, as a letter per dimension of the tensor it reduces *before any view*
(its "home": the result of the compute op the tensor is a view of), in memory order, size-1
dimensions left out: ``K`` kept, ``R`` reduced, ``S`` split (part kept, part reduced: a GroupNorm's
channels, viewed as groups and reduced within a group), neighbours of one letter merged (they are one
block of memory). A LayerNorm of ``(B, C)`` is ``mean@KR``, a GroupNorm of it ``mean@KS``; a BatchNorm
of ``(N, C, H, W)`` is ``RKR``; an InstanceNorm of it (``KKRR``) and a LayerNorm over ``(C, H, W)``
(``KRRR``) are ``KR``, as a row norm of a flattened view is; ``x.view(B * S, D).mean(-1)`` is
``x.mean(-1)``'s ``KR``. Views (reshape, permute, movedim) are seen through by the strides they share with the home
tensor; an elementwise op's result keeps the home of its operand of the same shape (so
``((g - mean) ** 2).mean(-1)`` of a view ``g`` is said in ``g``'s home too), and so does a copy
of a view (``.contiguous()`` of a permuted view: softmax's decomposition makes one). The sizes
themselves are not kept: a resized copy has the same labels.
"""

from __future__ import annotations

from typing import Any

import attrs

# ops (as opgraph's ``_op_name`` spells them) whose result depends on which dimensions they reduce or scan
REDUCTIONS = frozenset({
    "sum", "mean", "var", "std", "var_mean", "std_mean", "amax", "amin", "max", "min", "prod", "logsumexp",
    "linalg_vector_norm", "norm", "argmax", "argmin", "any", "all", "cumsum", "cumprod", "logcumsumexp",
    "cummax", "cummin", "softmax", "log_softmax",
})


def reduced_dims(op: Any, args: tuple, kwargs: dict | None, ndim: int) -> set[int]:
    """The dimensions of ``args[0]`` that ``op`` reduces (all of them when it names none)."""
    names = [a.name for a in op._schema.arguments]
    if "dim" not in names:
        return set(range(ndim))
    i = names.index("dim")
    dim = args[i] if i < len(args) else (kwargs or {}).get("dim")
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        return set(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return {d % ndim for d in dims} if ndim else set()


def _dense(t: Any) -> bool:
    expect = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz > 1):
        if stride != expect:
            return False
        expect *= size
    return True


def spans(view: Any, base: Any) -> list[frozenset[int]] | None:
    """For each dimension of ``view`` (a view of all of ``base``'s elements), the dimensions of
    ``base`` its elements run along; None when ``view`` is not such a view."""
    try:
        shared = view.untyped_storage()._cdata == base.untyped_storage()._cdata
    except Exception:  # noqa: BLE001 - a tensor without a storage: no view to see through
        return None
    if not shared or view.numel() != base.numel() or view.storage_offset() != base.storage_offset() \
            or not _dense(base):
        return None
    # a dimension of stride s and size n covers the strides [s, s * n): overlapping ranges share elements
    ranges = [(st, st * sz) for sz, st in zip(base.shape, base.stride())]
    out = []
    for size, stride in zip(view.shape, view.stride()):
        lo, hi = stride, stride * size
        out.append(frozenset(k for k, (blo, bhi) in enumerate(ranges)
                             if size > 1 and base.shape[k] > 1 and max(lo, blo) < min(hi, bhi)))
    return out


@attrs.frozen
class Frame:
    """A node's result ``tensor``, and for each of its dimensions the home dimensions it runs along."""

    tensor: Any
    order: tuple[int, ...]  # the home's dimensions of size > 1, in memory order
    dimsets: tuple[frozenset[int], ...]

    @classmethod
    def own(cls, t: Any) -> Frame:
        """``t`` as its own home."""
        order = tuple(sorted((k for k in range(t.dim()) if t.shape[k] > 1), key=lambda k: -t.stride(k)))
        return cls(t, order, tuple(frozenset({k}) if t.shape[k] > 1 else frozenset() for k in range(t.dim())))


class Frames:
    """Each traced node's frames: its result's, set when it is made (``add``) or marked (``own``),
    and its copies' (``copy``)."""

    def __init__(self) -> None:
        self.frames: dict[int, list[Frame]] = {}

    def own(self, node: int, t: Any) -> None:
        if node not in self.frames:
            self.frames[node] = [Frame.own(t)]

    def find(self, r: Any, node: int) -> tuple[Frame, list[frozenset[int]]] | None:
        """The frame of ``node`` that ``r`` is a view into, and the frame dimensions of ``r``'s."""
        for f in self.frames.get(node, ()):
            if (s := spans(r, f.tensor)) is not None:
                return f, s
        return None

    def derive(self, t: Any, a: Any, node: int) -> Frame | None:
        """A frame for ``t``, of ``a``'s shape, in the home of ``a`` (a view of ``node``)."""
        if tuple(a.shape) != tuple(t.shape) or (found := self.find(a, node)) is None:
            return None
        f, s = found
        return Frame(t, f.order, tuple(frozenset().union(*(f.dimsets[j] for j in sd)) for sd in s))

    def add(self, node: int, t: Any, operands: list[tuple[Any, tuple[int, ...]]], pointwise: bool) -> None:
        """A new node's frame: an elementwise op's result keeps that of its operand of the same shape."""
        if node in self.frames:
            return
        for a, nodes in operands if pointwise else ():
            if len(nodes) == 1 and (f := self.derive(t, a, nodes[0])) is not None:
                self.frames[node] = [f]
                return
        self.frames[node] = [Frame.own(t)]

    def copy(self, node: int, t: Any, a: Any) -> None:
        """``t`` a copy of ``a`` (both standing for ``node``: a layout op's result): its own frame."""
        if self.find(t, node) is None and (f := self.derive(t, a, node)) is not None:
            self.frames[node].append(f)

    def signature(self, r: Any, node: int, dims: set[int]) -> str:
        """``K``/``R``/``S`` per home dimension of reducing ``dims`` of ``r`` (a view of ``node``)."""
        found = self.find(r, node)
        if found is not None:
            f, s = found
        else:
            f = Frame.own(r)
            s = [frozenset({k}) for k in range(r.dim())]
        chars = []
        for k in f.order:
            kinds = {d in dims for d, sd in enumerate(s) if any(k in f.dimsets[j] for j in sd)}
            chars.append("S" if len(kinds) == 2 else "R" if True in kinds else "K")
        # neighbours in memory order with one letter are one block: reducing (C, H, W) of a dense tensor
        # is reducing its flattened C*H*W (``x.flatten(1).log_softmax(1)`` is a row log-softmax)
        return "".join(c for i, c in enumerate(chars) if i == 0 or c != chars[i - 1])
