"""The judge's helpers for input and output trees: move to the device, refill in place, compare
reference outputs for equality, clone exact tensors (never a subclass the candidate could send)."""

from __future__ import annotations

from typing import Any


def to_device(obj: Any, device: str) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(x, device) for x in obj)
    return obj


def fill_in_place(buffer: list[Any], fresh: list[Any]) -> bool:
    """Copy ``fresh`` into ``buffer`` in place; False when shapes or values differ structurally."""
    import torch

    if len(buffer) != len(fresh):
        return False
    for b, f in zip(buffer, fresh):
        if isinstance(b, torch.Tensor) != isinstance(f, torch.Tensor):
            return False
        if isinstance(b, torch.Tensor):
            if b.shape != f.shape or b.dtype != f.dtype:
                return False
        elif b != f:
            return False
    with torch.no_grad():
        for b, f in zip(buffer, fresh):
            if isinstance(b, torch.Tensor):
                b.copy_(f)
    return True


def outputs_differ(a: Any, b: Any) -> bool:
    """Whether two reference outputs differ anywhere (structure, shape or a value)."""
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape != b.shape or a.dtype != b.dtype or not torch.equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) != len(b) or any(outputs_differ(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) != set(b) or any(outputs_differ(a[k], b[k]) for k in a)
    return a != b


def clone_tree(obj: Any) -> Any:
    import torch

    if type(obj) is torch.Tensor:
        return obj.detach().clone()
    if type(obj) in (list, tuple):
        return type(obj)(clone_tree(x) for x in obj)
    if type(obj) is dict:
        return {k: clone_tree(v) for k, v in obj.items()}
    return obj


def replace_tensors(obj: Any, tensors: Any) -> Any:
    """``obj`` with each tensor replaced, in order, by the next of ``tensors`` (same structure)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return next(tensors)
    if isinstance(obj, (list, tuple)):
        return type(obj)(replace_tensors(x, tensors) for x in obj)
    if isinstance(obj, dict):
        return {k: replace_tensors(v, tensors) for k, v in obj.items()}
    return obj
