"""End to end on the CPU backend: a solution that rewrites the baseline cache at import changes no
later verdict, and a verified cache entry is what the evaluation uses."""

from __future__ import annotations

import json
import re

import pytest

from kag.core.eval.orchestrator.baseline_cache import BaselineCache
from kag.core.eval.orchestrator.evaluate import EvalOptions, evaluate
from kag.core.records import Solution, Task, TimingStats
from kag.core.eval.orchestrator.feedback import format_eval
from tests.core.eval.orchestrator.test_evaluate import HEADER, TASK_CODE

# Honest but slow (a Python loop, far slower than eager), and at import it tries to rewrite every entry
# of baselines.json to a million milliseconds, keeping the MACs: believed, that is reward 2 from now on.
FORGER = Solution(model_new='''
import json, pathlib


def _forge(cache):
    data = json.loads(cache.read_text())
    for entry in data.values():
        entry["stats"].update(median_ms=1e6, mean_ms=1e6, min_ms=1e6, max_ms=1e6, iqr_ms=0.0)
    cache.write_text(json.dumps(data))


try:
    _forge(pathlib.Path(CACHE_DIR) / "baselines.json")
    print("FORGED")
except OSError as exc:
    print("REFUSED", type(exc).__name__)
''' + HEADER + '''
        flat = (x * self.weight).reshape(-1).tolist()
        out = [v * self.scale if v > 0 else 0.0 for v in flat]
        return torch.tensor(out, dtype=x.dtype).reshape(x.shape)
''')


@pytest.mark.slow
def test_a_solution_that_rewrites_the_baseline_cache_changes_no_later_verdict(tmp_path) -> None:
    import torch

    from kag.core.eval.orchestrator.baseline_cache import baseline_key
    from kag.core.eval.judge.timing import device_info

    (tmp_path / "model.py").write_text(TASK_CODE)
    task = Task(name="relu_scale", source="file", code=TASK_CODE, path=str(tmp_path / "model.py"))
    cache_dir = tmp_path / "cache"
    opts = EvalOptions(backend="cpu", num_timed=5, warmup=1, num_checks=2, cache_dir=str(cache_dir), guards=(),
                       baselines=("eager",))
    info = device_info("cpu", "cpu")
    key = baseline_key(task.code_hash, info, torch.__version__, "eager", "default", 5)
    # the evaluator's own settled timing, as an earlier evaluation cached it
    BaselineCache(cache_dir).put(key, TimingStats(0.2, 0.2, 0.19, 0.25, 0.01, 0.01, 5))
    solution = Solution(model_new=FORGER.model_new.replace("CACHE_DIR", repr(str(cache_dir))))

    before = (cache_dir / "baselines.json").read_bytes()
    first = evaluate(task, solution, opts)
    assert first.ok and first.reward.value == 1, (first.error, first.times_ms)
    eager = first.metadata["baseline_cache"]["eager"]
    if "retimed" in eager:  # other work on the CPUs while the candidate was timed: eager re-timed to match it
        assert eager["retimed"]["first_ms"] == 0.2, eager  # ... after the cached entry was read
    else:
        assert first.times_ms["eager"] == 0.2 and eager["source"] == "cache", (eager, first.metadata["notes"])
        assert re.search(r"eager: 0\.2000 ms median .*\(cached \d+ s ago, 5 runs\)", format_eval(first))
    # the first layer: the candidate cannot reach the cache (its sandbox hides it)
    assert (cache_dir / "baselines.json").read_bytes() == before
    # the second: what a process that could reach it wrote, MACs kept, is not believed
    exec(compile(solution.model_new.split("try:")[0], "forger", "exec"), scope := {})
    scope["_forge"](cache_dir / "baselines.json")
    forged = json.loads((cache_dir / "baselines.json").read_text())[key.text]
    assert forged["stats"]["median_ms"] == 1e6, "the attack did not happen: this test would prove nothing"

    second = evaluate(task, solution, opts)
    assert second.ok and second.reward.value == 1, (second.error, second.times_ms)
    assert second.times_ms["eager"] < 1000 and second.metadata["baseline_cache"]["eager"]["source"] == "timed"
    assert any("ignored the entry for eager" in note and "MAC does not verify" in note
               for note in second.metadata["notes"]), second.metadata.get("notes")


FIRST_CALL_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    calls = 0

    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.weight = nn.Parameter(torch.randn(64))

    def forward(self, x):
        Model.calls += 1
        if Model.calls in (1, 20):
            import gc, sys
            observe = sys.modules.get("kag.core.eval.candidate.observe")  # the runner's observer, if one is on
            observed = observe is not None and any(isinstance(o, observe.CallObserver)
                                                   and (o._prof is not None or o.counter is not None)
                                                   for o in gc.get_objects())
            if Model.calls == 1 and observed:  # where torch.compile compiles: under a profiler, slow code
                raise RuntimeError("the first call ran under a profiler session")
            if Model.calls == 20 and not observed:
                raise RuntimeError("a later call ran without the observer")
        return torch.relu(x * self.weight) * self.scale


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return [2.0]
'''


def test_a_baseline_is_first_called_outside_the_profiler_and_timed_under_it(tmp_path) -> None:
    """torch.compile compiles at a baseline's first call; compiled under the observer's profiler
    session it ran twice as slow ever after (H200), so the runner's observer starts after the first
    window, and every timed call still runs under it (a cost the candidate's calls pay too)."""
    path = tmp_path / "model.py"
    path.write_text(FIRST_CALL_TASK)
    task = Task(name="first_call", source="file", code=FIRST_CALL_TASK, path=str(path))
    good = Solution(model_new=HEADER + "        return (x * self.weight).clamp_min(0) * self.scale\n")
    result = evaluate(task, good, EvalOptions(backend="cpu", num_timed=5, warmup=1, num_checks=3,
                                              cache_dir=str(tmp_path / "cache"), guards=(), baselines=("eager",)))
    assert result.ok, result.error
    assert result.times_ms["eager"] > 0
