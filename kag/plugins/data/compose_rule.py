"""The ``rule`` composer: shape-aware random stacking of seed operators, no model needed.

Each next operator is drawn at random (family first, then operator) and kept only if it runs on
the current output shape, found on the meta device; the task's forward applies them in order.
"""

from __future__ import annotations

import math
import random
from typing import Any

from kag.plugin import (ComposeError, ComposedTask, SIZE_PROFILES, Seed, Step, SynthesisError, expand, fill_values,
                        hookimpl, probe_output, render_task, sample_shape)


# families whose ops take any input rank; others run only on the (batched) rank they were crawled with
RANK_FREE = {"activation", "elementwise", "softmax", "scan", "reduction", "matmul"}


def pick(seeds: list[Seed], rng: random.Random, avoid: str | None = None) -> Seed:
    """A seed drawn family-first, so 40 activations do not crowd out the 3 convolutions."""
    families = sorted({s.family for s in seeds})
    family = rng.choice(families)
    pool = [s for s in seeds if s.family == family and s.op != avoid] or seeds
    return rng.choice(pool)


def title(steps: list[Step], bucket: str, composer: str) -> str:
    return f"{' -> '.join(s.op for s in steps)} ({bucket}, composed by kag data {composer})"


class RuleComposer:
    """Random stacking that tracks each operator's output shape (``profile`` = cpu or gpu sizes)."""

    name = "rule"

    def __init__(self, profile: str = "cpu", max_tries: int = 40, **_: Any):
        if profile not in SIZE_PROFILES:
            raise SynthesisError(f"unknown size profile {profile!r}; choose one of {', '.join(SIZE_PROFILES)}")
        self.profile = SIZE_PROFILES[profile]
        self.profile_name = profile
        self.max_tries = int(max_tries)

    def params(self) -> dict[str, Any]:
        return {"profile": self.profile_name, "max_tries": self.max_tries}

    def compose(self, seeds: list[Seed], bucket: str, index: int, seed: int = 0) -> ComposedTask:
        rng = random.Random(f"{seed}:{index}:{bucket}")
        torch_seeds = [s for s in seeds if s.source == "torch"]
        hidden = bucket == "transformers"
        pool = [s for s in seeds if s.source.startswith("transformers")] if hidden else torch_seeds
        if not pool:
            raise ComposeError(f"no {'transformers' if hidden else 'torch'} seeds")
        count = 1 if hidden else int(bucket.split("#")[1])
        for _ in range(self.max_tries):  # the first operator and an input shape it runs on
            first = pick(pool, rng)
            shape = sample_shape(first.rank, self.profile, rng, hidden=hidden)
            fitted = self._fit([], shape, shape, [first], rng, last=count == 1)
            if fitted:
                steps, cur = fitted
                break
        else:
            raise ComposeError(f"no first operator runs on a sampled input after {self.max_tries} tries")
        source = first.source if hidden else bucket
        for position in range(1, count):
            fitted = self._fit(steps, shape, cur, [pick(torch_seeds, rng, avoid=steps[-1].op)
                                                   for _ in range(self.max_tries)], rng, last=position == count - 1)
            if not fitted:
                raise ComposeError(f"no operator fits an output of rank {len(cur)} after {self.max_tries} tries")
            steps, cur = fitted
        code = render_task(steps, shape, title(steps, source, "rule"))
        return ComposedTask(id=f"{bucket}:{index}", code=code, ops=[s.op for s in steps], data_source=source,
                         composer="rule", made_by={"input_shape": shape, "output_shape": cur,
                                                   "seeds": [s.op for s in steps], "profile": self.profile_name})

    def _fit(self, steps: list[Step], shape: list[int], cur: list[int], candidates: list[Seed],
             rng: random.Random, last: bool) -> tuple[list[Step], list[int]] | None:
        """The first candidate that runs on the current output, with the new output shape."""
        for cand in candidates:
            if cand.family not in RANK_FREE and cand.rank != len(cur):
                continue  # e.g. a Conv2d on a 3-D tensor would read it as unbatched
            trial = steps + [expand(cand.step, fill_values(cur, self._choices(rng)))]
            try:
                out, dtype = probe_output(render_task(trial, shape, ""), shape)
            except Exception:  # noqa: BLE001 - this operator does not fit here, try another
                continue
            if not dtype.startswith("float") or math.prod(out) == 0 or math.prod(out) > 4 * self.profile["max_numel"]:
                continue
            if not last and not 2 <= len(out) <= 5:
                continue
            return trial, out
        return None

    def _choices(self, rng: random.Random) -> dict[str, int]:
        return {"c2": rng.choice(self.profile["c2"]), "f2": rng.choice(self.profile["f2"])}


@hookimpl
def kag_register_composers(register) -> None:
    register("rule", RuleComposer)
