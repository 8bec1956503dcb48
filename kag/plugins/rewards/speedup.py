"""Raw speed-up over torch.compile (the paper's ablation): t_compile / t, or -1 when not correct."""

from __future__ import annotations

from kag.plugin import EvalResult, hookimpl


class SpeedupReward:
    name = "speedup"

    def __init__(self, baseline: str = "compile"):
        self.baseline = baseline

    def __call__(self, result: EvalResult) -> float:
        t = result.times_ms.get("candidate")
        base = result.times_ms.get(self.baseline)
        if not result.ok or not t or not base:
            return -1.0
        return base / t


@hookimpl
def kag_register_rewards(register) -> None:
    register("speedup", SpeedupReward)
