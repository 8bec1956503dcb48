"""Benchmark metrics: the paper's table (pass rate, faster-than rates, geomean speed-ups) and fast_p.

Rates are over all tasks (a failed or missing result counts as not passed, not faster); geomean
speed-ups are over correct solutions only, as in the paper and KernelBench's ``score.py``.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import attrs

from kag.core.records import EvalResult

FASTER_MARGIN = 0.05


@attrs.define
class Summary:
    tasks: int
    passed: int
    pass_rate: float
    faster_than_eager: float
    faster_than_compile: float
    geomean_vs_eager: float | None
    geomean_vs_compile: float | None
    mean_reward: float | None


def _faster(speedup: float | None, margin: float) -> bool:
    # "faster" means at most (1 - margin) of the baseline's time, the reward's milestone.
    return speedup is not None and speedup > 0 and 1.0 / speedup <= 1.0 - margin


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def summarize(results: Sequence[EvalResult], margin: float = FASTER_MARGIN) -> Summary:
    n = len(results)
    ok = [r for r in results if r.ok]
    rewards = [r.reward.value for r in results if r.reward is not None]
    return Summary(
        tasks=n,
        passed=len(ok),
        pass_rate=len(ok) / n if n else 0.0,
        faster_than_eager=sum(_faster(r.speedup_vs_eager, margin) for r in ok) / n if n else 0.0,
        faster_than_compile=sum(_faster(r.speedup_vs_compile, margin) for r in ok) / n if n else 0.0,
        geomean_vs_eager=geomean(r.speedup_vs_eager for r in ok),
        geomean_vs_compile=geomean(r.speedup_vs_compile for r in ok),
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
    )


def fast_p(results: Sequence[EvalResult], p: float, baseline: str = "compile") -> float:
    """KernelBench's fast_p: the fraction of ALL tasks that are correct with speed-up > p."""
    if not results:
        return 0.0
    attr = "speedup_vs_compile" if baseline == "compile" else "speedup_vs_eager"
    hits = sum(1 for r in results if r.ok and (getattr(r, attr) or 0.0) > p)
    return hits / len(results)


def fast_p_curve(results: Sequence[EvalResult], ps: Sequence[float], baseline: str) -> list[float]:
    return [fast_p(results, p, baseline) for p in ps]
