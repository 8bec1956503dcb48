"""Comparing a candidate's outputs with the reference's, in the judge.

Exact container and tensor types, shape, dtype, device, then values under the tolerance policy:
NaN where the reference has none (or the reverse) fails, infinities must match, and an output
that is (near) constant where the reference varies fails even if every element is within
tolerance (all-zeros passing a loose atol is a classic hack). On top of the elementwise test, a
normwise one compares the output on the reference's own scale: ||out - ref|| <= rtol * ||ref||
(plus a floor far below atol). Outputs whose values are all far below atol (zeros with a sparse
sample of real values pass every elementwise test there) fail it; a near miss of the normwise
test is settled against a float64 reference (kag.core.eval.judge.reference64), whose distance to the float32
reference says how much rounding this computation has. Large tensors are compared in chunks so a
6.4 GB output does not need several 6.4 GB temporaries.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import attrs

CHUNK_ELEMENTS = 1 << 25
# The fast pass (kept in the output's precision) is a hair stricter than the exact float64 one, so
# rounding can never let it pass an output the exact comparison would fail.
FAST_PASS_SHRINK = 1.0 - 2.0 ** -20

# tolerance lookup: dtype -> (atol, rtol)
ToleranceFn = Callable[[Any], tuple[float, float]]


@attrs.define
class Mismatch:
    """The first difference found: where (path, index) and how big."""

    path: str
    message: str
    index: tuple[int, ...] | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    bad_elements: int | None = None  # of a floating-point tensor, outside tolerance
    elements: int | None = None
    non_finite_bad: int = 0  # of those, where the output or the reference is NaN or infinite
    normwise: bool = False  # every value within tolerance, but ||out - ref|| > rtol * ||ref||

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    @property
    def few_values_off(self) -> bool:
        """At most 1% of a floating-point output's values outside tolerance, by finite amounts:
        what the reference's own rounding can cause (a sum that cancels to near zero, say)."""
        return (self.bad_elements is not None and bool(self.elements) and self.max_abs_error is not None
                and math.isfinite(self.max_abs_error) and not self.non_finite_bad
                and self.bad_elements <= 0.01 * self.elements)


def compare_outputs(ref: Any, out: Any, tolerance: ToleranceFn, path: str = "output") -> Mismatch | None:
    """None when ``out`` matches ``ref``; else the first mismatch (depth first)."""
    import torch

    if type(out) is not type(ref):
        return Mismatch(path, f"type {_type_name(out)}, expected {_type_name(ref)} (types must match exactly)")
    if isinstance(ref, torch.Tensor):
        return _compare_tensor(ref, out, tolerance, path)
    if isinstance(ref, (tuple, list)):
        if len(out) != len(ref):
            return Mismatch(path, f"{len(out)} items, expected {len(ref)}")
        for i, (r, o) in enumerate(zip(ref, out)):
            found = compare_outputs(r, o, tolerance, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(ref, dict):
        if set(out) != set(ref):
            return Mismatch(path, f"keys {sorted(map(str, out))}, expected {sorted(map(str, ref))}")
        for key in ref:
            found = compare_outputs(ref[key], out[key], tolerance, f"{path}[{key!r}]")
            if found is not None:
                return found
        return None
    if isinstance(ref, float):
        atol, rtol = tolerance(torch.float32)
        if ref != ref and out != out:
            return None
        if not abs(out - ref) <= atol + rtol * abs(ref) and out != ref:
            return Mismatch(path, f"got {out!r}, expected {ref!r}")
        return None
    if out != ref:
        return Mismatch(path, f"got {out!r}, expected {ref!r}")
    return None


def _type_name(x: Any) -> str:
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _compare_tensor(ref: Any, out: Any, tolerance: ToleranceFn, path: str) -> Mismatch | None:
    import torch

    if type(out) is not torch.Tensor:
        return Mismatch(path, f"type {_type_name(out)}, expected torch.Tensor exactly")
    if out.shape != ref.shape:
        return Mismatch(path, f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Mismatch(path, f"dtype {out.dtype}, expected {ref.dtype}")
    if out.device.type != ref.device.type:
        return Mismatch(path, f"device {out.device}, expected {ref.device}")
    if out.layout != ref.layout or ref.layout != torch.strided:
        return Mismatch(path, f"layout {out.layout}, expected {ref.layout} (only dense tensors are compared)")
    if ref.numel() == 0:
        return None
    r = ref.detach().reshape(-1)
    o = out.detach().reshape(-1)
    if ref.is_complex():
        r, o = torch.view_as_real(r).reshape(-1), torch.view_as_real(o).reshape(-1)
    exact = not (r.is_floating_point())
    atol, rtol = (0.0, 0.0) if exact else tolerance(ref.dtype)
    if not exact:
        fast = _all_close_fast(r, o, atol, rtol)
        if fast is not None:  # every value within tolerance and finite: the rest from its sums
            return _spread_verdict(fast.ref_spread, fast.out_spread, atol, path) \
                or _norm_verdict(fast.err_norm, fast.ref_norm, atol, rtol, r.numel(), path)
    # Counts and maxima stay on the device until the end: one synchronisation per tensor, not
    # several per chunk (a 6.4 GB output is 48 chunks).
    bad_counts, abs_maxes, rel_maxes, non_finite = [], [], [], []
    for start in range(0, r.numel(), CHUNK_ELEMENTS):
        rc = r[start:start + CHUNK_ELEMENTS]
        oc = o[start:start + CHUNK_ELEMENTS]
        bad, diff, same = _outside(rc, oc, exact, atol, rtol)
        if not exact:
            finite = torch.isfinite(diff) & ~same
            d = torch.where(finite, diff, torch.zeros_like(diff))
            abs_maxes.append(d.max())
            rel_maxes.append((d / rc.abs().double().clamp_min(1e-12)).max())
            non_finite.append((bad & ~torch.isfinite(diff)).sum())
        bad_counts.append(bad.sum())
    bad_count = int(torch.stack(bad_counts).sum())
    max_abs = float(torch.stack(abs_maxes).max()) if abs_maxes else 0.0
    max_rel = float(torch.stack(rel_maxes).max()) if rel_maxes else 0.0
    first_bad: int | None = None
    if bad_count:
        for k, count in enumerate(bad_counts):
            if int(count):
                begin = k * CHUNK_ELEMENTS
                bad = _outside(r[begin:begin + CHUNK_ELEMENTS], o[begin:begin + CHUNK_ELEMENTS], exact, atol, rtol)[0]
                first_bad = begin + int(torch.nonzero(bad)[0, 0])
                break
    if first_bad is not None:
        index = _unravel(first_bad, tuple(ref.shape) + ((2,) if ref.is_complex() else ()))
        got, want = o[first_bad].item(), r[first_bad].item()
        tol = "exact match required" if exact else f"atol={atol:g} rtol={rtol:g}"
        return Mismatch(
            path,
            f"mismatch at index {list(index)}: got {got!r}, expected {want!r}; {bad_count} of "
            f"{r.numel()} elements outside tolerance ({tol}); max abs error {max_abs:.4g}, "
            f"max rel error {max_rel:.4g}",
            index=index, max_abs_error=max_abs, max_rel_error=max_rel,
            bad_elements=None if exact else bad_count, elements=r.numel(),
            non_finite_bad=int(torch.stack(non_finite).sum()) if non_finite else 0,
        )
    if not exact:
        return _constant_check(r, o, atol, path) or _normwise_check(r, o, atol, rtol, path)
    return None


NORM_FLOOR = 1e-6  # of atol, per element (root mean square): only an all-but-zero reference reaches it


def norms(r: Any, o: Any) -> tuple[float, float]:
    """(||o - r||, ||r||) of two flat tensors, accumulated in float64, chunk by chunk, with NaN
    and infinities left out (the elementwise test has judged them)."""
    import torch

    err2, ref2 = [], []
    for start in range(0, r.numel(), CHUNK_ELEMENTS):
        rc = r[start:start + CHUNK_ELEMENTS].double()
        oc = o[start:start + CHUNK_ELEMENTS].to(rc.device).double()
        finite = torch.isfinite(rc) & torch.isfinite(oc)
        d = torch.where(finite, oc - rc, torch.zeros_like(rc))
        err2.append(torch.dot(d, d))
        rf = torch.where(finite, rc, torch.zeros_like(rc))
        ref2.append(torch.dot(rf, rf))
        del rc, oc, finite, d, rf
    return float(torch.stack(err2).sum()) ** 0.5, float(torch.stack(ref2).sum()) ** 0.5


def norm_bound(ref_norm: float, atol: float, rtol: float, n: int) -> float:
    return rtol * ref_norm + NORM_FLOOR * atol * n ** 0.5


def _normwise_check(r: Any, o: Any, atol: float, rtol: float, path: str) -> Mismatch | None:
    """Every value passed: is the output also right on the reference's own scale?"""
    err, ref_norm = norms(r, o)
    return _norm_verdict(err, ref_norm, atol, rtol, r.numel(), path)


def _norm_verdict(err: float, ref_norm: float, atol: float, rtol: float, n: int, path: str) -> Mismatch | None:
    bound = norm_bound(ref_norm, atol, rtol, n)
    if err <= bound:
        return None
    return Mismatch(path, f"every value is within atol={atol:g}/rtol={rtol:g}, but ||out - ref|| = {err:.4g} exceeds "
                          f"rtol * ||ref|| = {bound:.4g}: the output is wrong on the reference's own scale "
                          f"(values far below atol must still be computed)",
                    max_abs_error=err, elements=n, normwise=True)


@attrs.define
class FastPass:
    """What one pass over a matching output measured: the spreads and the norms the remaining
    tests need, so they cost no further pass over a 6.4 GB tensor."""

    ref_spread: float
    out_spread: float
    err_norm: float
    ref_norm: float


def _all_close_fast(r: Any, o: Any, atol: float, rtol: float) -> FastPass | None:
    """A FastPass only if every element is within tolerance (and finite), in a few passes in the
    output's precision (float32 for half types) and one synchronisation. An honest output, the
    common case, costs about a fifth of the exact path's float64 passes (a 6.4 GB output is
    compared on every check); None (a mismatch, or a NaN or infinity anywhere) goes to the exact
    path, which decides and describes the first mismatch."""
    import torch

    work = torch.float64 if r.dtype == torch.float64 else torch.float32
    oks, stats = [], []
    for start in range(0, r.numel(), CHUNK_ELEMENTS):
        rc = r[start:start + CHUNK_ELEMENTS].to(work)
        oc = o[start:start + CHUNK_ELEMENTS].to(work)
        diff = torch.sub(oc, rc)
        r_lo, r_hi = torch.aminmax(rc)
        o_lo, o_hi = torch.aminmax(oc)
        stats.append(torch.stack([r_lo.double(), r_hi.double(), o_lo.double(), o_hi.double(),
                                  torch.linalg.vector_norm(diff, dtype=torch.float64) ** 2,
                                  torch.linalg.vector_norm(rc, dtype=torch.float64) ** 2]))
        diff.abs_()
        bound = rc.abs().mul_(rtol * FAST_PASS_SHRINK).add_(atol * FAST_PASS_SHRINK)
        oks.append(torch.le(diff, bound).all())  # NaN or infinite differences compare False
        oks.append(torch.isfinite(bound.sum()))  # an infinite or NaN reference: the exact path
        del rc, oc, diff, bound
    if not bool(torch.stack(oks).all()):
        return None
    st = torch.stack(stats).cpu()
    return FastPass(ref_spread=float(st[:, 1].max() - st[:, 0].min()), out_spread=float(st[:, 3].max() - st[:, 2].min()),
                    err_norm=float(st[:, 4].sum()) ** 0.5, ref_norm=float(st[:, 5].sum()) ** 0.5)


def _outside(rc: Any, oc: Any, exact: bool, atol: float, rtol: float) -> tuple[Any, Any, Any]:
    """(bad, |out - ref|, same) for one chunk: the elements outside tolerance (NaN matches NaN)."""
    import torch

    if exact:
        return rc != oc, None, None
    rc, oc = rc.double(), oc.double()
    diff = (oc - rc).abs()
    same = (oc == rc) | (torch.isnan(oc) & torch.isnan(rc))
    close = (diff <= atol + rtol * rc.abs()) & torch.isfinite(diff)
    return ~(same | close), diff, same


def _constant_check(r: Any, o: Any, atol: float, path: str) -> Mismatch | None:
    """Reject an output that barely varies where the reference clearly does."""
    import torch

    def spread(x: Any) -> float:
        x = x[torch.isfinite(x)] if not bool(torch.isfinite(x).all()) else x
        if x.numel() < 2:
            return 0.0
        lo, hi = torch.aminmax(x)
        return float(hi.double() - lo.double())

    if r.numel() < 2:
        return None
    return _spread_verdict(spread(r), spread(o), atol, path)


def _spread_verdict(ref_spread: float, out_spread: float, atol: float, path: str) -> Mismatch | None:
    if ref_spread <= 0.1 * atol:
        return None
    if out_spread <= 1e-3 * ref_spread:
        return Mismatch(path, f"output is (near) constant (spread {out_spread:.3g}) while the reference's "
                              f"values spread over {ref_spread:.3g}; compute the real result")
    return None


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for dim in reversed(shape):
        index.append(flat % dim if dim else 0)
        flat = flat // dim if dim else 0
    return tuple(reversed(index))
