"""The docker sandbox keeps the baselines its containers timed (their judges cannot write the mounted
cache) under the key a judge reads them by (kag.core.eval.orchestrator.baseline_cache.baseline_key)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from kag.core.eval.orchestrator.baseline_cache import BaselineCache, baseline_key
from kag.core.eval.orchestrator.evaluate import EvalOptions
from kag.core.records import EvalResult, Task, TimingStats
from kag.plugins.sandboxes.docker_eval import EvalState

DEVICE = {"backend": "cpu", "torch": torch.__version__, "name": "AMD EPYC", "type": "cpu", "threads": 2, "cpus": 2}
STATS = TimingStats(1.6, 1.6, 1.55, 1.7, 0.05, 0.04, 20)


def result_of(status: dict) -> EvalResult:
    return EvalResult(task="relu", backend="cpu", compiled=True, correct=True, device=dict(DEVICE),
                      timing={"eager": STATS}, times_ms={"eager": STATS.median_ms},
                      metadata={"baseline_cache": {"eager": status}})


def recorded(tmp_path: Path, status: dict) -> TimingStats | None:
    task = Task(name="relu", source="file", code="# a task\n")
    options = EvalOptions(backend="cpu", num_timed=20, baselines=("eager",))
    EvalState.record_baselines(SimpleNamespace(baselines=tmp_path), task, options, result_of(status))
    hit = BaselineCache(tmp_path).get(baseline_key(task.code_hash, DEVICE, torch.__version__, "eager", "default", 20))
    return hit.stats if hit is not None else None


def test_a_settled_timing_a_container_could_not_cache_is_kept_for_the_next(tmp_path: Path) -> None:
    """Before, the sandbox compared the judge's record (a dict) with "miss" and wrote under a key
    without the timing method: no container ever read a baseline another had timed."""
    assert recorded(tmp_path, {"source": "timed", "status": "miss", "cached": False}) == STATS


def test_an_unsettled_or_cached_timing_is_not_kept(tmp_path: Path) -> None:
    assert recorded(tmp_path, {"source": "timed", "status": "unsettled", "cached": False}) is None
    assert recorded(tmp_path, {"source": "cache", "status": "hit", "cached": True}) is None
