"""The paper's milestone reward: -1 failed, 1 correct, 2 beats eager, 3 beats eager and compile."""

from __future__ import annotations

from kag.plugin import EvalResult, hookimpl


def beats(candidate_ms: float | None, baseline_ms: float | None, margin: float) -> bool:
    """True when the candidate takes at most (1 - margin) of the baseline's time."""
    if candidate_ms is None or baseline_ms is None or candidate_ms <= 0:
        return False
    return candidate_ms <= (1.0 - margin) * baseline_ms


class MilestoneReward:
    """Discrete milestones absorb timing noise better than a raw speedup (the paper's ablation)."""

    name = "milestone"

    def __init__(self, margin: float = 0.05):
        self.margin = float(margin)

    def __call__(self, result: EvalResult) -> float:
        if not result.ok:
            return -1.0
        t = result.times_ms.get("candidate")
        faster_eager = beats(t, result.times_ms.get("eager"), self.margin)
        faster_compile = beats(t, result.times_ms.get("compile"), self.margin)
        if faster_eager and faster_compile:
            return 3.0
        if faster_eager:
            return 2.0
        return 1.0


@hookimpl
def kag_register_rewards(register) -> None:
    register("milestone", MilestoneReward)
