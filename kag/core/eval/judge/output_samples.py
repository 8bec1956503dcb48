"""Re-checks of large GPU outputs on a secret sample of their elements, compared after the timing.

Trusted side. A timed call's re-check must cost the gap after its window the same whether or not it
was chosen (kag.core.eval.judge.judge_calls pads every gap to one length). Where the re-checked outputs fit
the judge's memory they are copied whole and compared after the last window. Where they do not (a
6.4 GB ReLU output), comparing each one in the gap made every gap as long as a reference run and a
full comparison, 0.2 s, and a timing of 160 windows took 35 s. Here such an output is read only at a
secret random set of positions (``SamplePlan``: drawn once per evaluation, in the judge's memory,
never told to the candidate), the values are kept, and the reference is run and compared at the same
positions after the last window. The checks before the timing still compare every element.

What the sample sees: a call whose output is wrong at a fraction ``f`` of its elements passes with
probability (1 - f) ** n for ``n`` sampled elements (millions): any skipped share of the work worth
a measurable speed-up shows. Which elements are sampled is unknowable to the candidate, and the read
is made while it is stopped, from its memory, as a whole read is.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

SAMPLE_BYTES_PER_CALL = 32 << 20  # the sampled values of one re-checked call's outputs, at most


def element_offsets(positions: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    """Element offsets (in units of the element) of flat logical ``positions`` in a tensor of
    ``shape`` laid out with ``strides``."""
    import torch

    offsets = torch.zeros_like(positions)
    rest = positions
    for size, stride in zip(reversed(shape), reversed(strides)):
        offsets += (rest % size) * stride
        rest = torch.div(rest, size, rounding_mode="floor")
    return offsets


class SamplePlan:
    """Secret positions, one set per output tensor of the reference's output tree."""

    def __init__(self, template: Any, device: str, budget_bytes: int = SAMPLE_BYTES_PER_CALL) -> None:
        import torch

        from kag.core.eval.candidate.checks import iter_tensors

        tensors = list(iter_tensors(template))
        total = sum(t.numel() * t.element_size() for t in tensors) or 1
        share = min(1.0, budget_bytes / total)
        gen = torch.Generator(device=device)
        gen.manual_seed(secrets.randbits(63))
        self.positions = [torch.randint(0, max(t.numel(), 1), (max(1, math.ceil(share * t.numel())),),
                                        generator=gen, device=device) if t.numel() else None for t in tensors]
        self.share = share

    def elements(self) -> int:
        return sum(int(p.numel()) for p in self.positions if p is not None)

    def pick(self, tree: Any) -> Any:
        """``tree`` (the judge's own tensors, shaped as the reference's) at the plan's positions."""
        from kag.core.eval.candidate.checks import iter_tensors
        from kag.core.eval.judge.judge_inputs import replace_tensors

        picked = [t.reshape(-1)[p] if p is not None else t.reshape(-1) for t, p in
                  zip(iter_tensors(tree), self.positions)]
        return replace_tensors(tree, iter(picked))


def verify_sampled(judge: Any, plan: SamplePlan, out: Any, seed: int, where: str) -> Any:
    """``out`` (sampled values) against the reference on the inputs of ``seed`` at the same
    positions: the mismatch, None when right. A near miss is settled against the float64
    reference at those positions, as a whole comparison's is (kag.core.eval.judge.reference64)."""
    from kag.core.eval.judge.compare import compare_outputs

    if isinstance(out, str):
        return out
    ref = judge.reference_on(seed)
    mismatch = compare_outputs(plan.pick(ref), out, judge.tolerance)
    if mismatch is None:
        return None
    if not (getattr(mismatch, "few_values_off", False) or getattr(mismatch, "normwise", False)):
        return mismatch
    try:
        exact = plan.pick(judge.ref64.outputs(seed, ref))
    except Exception as exc:  # noqa: BLE001 - no float64 reference: the float32 verdict stands
        judge.report.notes.append(f"{where}: no float64 reference to settle a near miss ({type(exc).__name__}: {exc})")
        return mismatch
    if compare_outputs(exact, out, judge.tolerance) is not None:
        return mismatch
    judge.report.notes.append(f"{where}: sampled values outside tolerance of the float32 reference, all within it "
                              f"of a float64 reference: accepted")
    return None
