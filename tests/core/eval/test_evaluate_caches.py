"""End to end on the CPU backend: a solution that rewrites the baseline cache at import changes no
later verdict, and a verified cache entry is what the evaluation uses."""

from __future__ import annotations

import json
import re

import pytest

from kag.core.eval.baseline_cache import BaselineCache, BaselineKey
from kag.core.eval.evaluate import EvalOptions, evaluate
from kag.core.records import Solution, Task, TimingStats
from kag.core.eval.feedback import format_eval
from tests.core.eval.test_evaluate import HEADER, TASK_CODE

# Honest but slow (a Python loop, far slower than eager), and at import it rewrites every entry of
# baselines.json to a million milliseconds, keeping the MACs: believed, that is reward 2 from now on.
FORGER = Solution(model_new='''
import json, pathlib
_cache = pathlib.Path(CACHE_DIR) / "baselines.json"
_data = json.loads(_cache.read_text())
for _entry in _data.values():
    _entry["stats"].update(median_ms=1e6, mean_ms=1e6, min_ms=1e6, max_ms=1e6, iqr_ms=0.0)
_cache.write_text(json.dumps(_data))
''' + HEADER + '''
        flat = (x * self.weight).reshape(-1).tolist()
        out = [v * self.scale if v > 0 else 0.0 for v in flat]
        return torch.tensor(out, dtype=x.dtype).reshape(x.shape)
''')


@pytest.mark.slow
def test_a_solution_that_rewrites_the_baseline_cache_changes_no_later_verdict(tmp_path) -> None:
    import torch

    from kag.core.eval.timing import device_info

    (tmp_path / "model.py").write_text(TASK_CODE)
    task = Task(name="relu_scale", source="file", code=TASK_CODE, path=str(tmp_path / "model.py"))
    cache_dir = tmp_path / "cache"
    opts = EvalOptions(backend="cpu", num_timed=5, warmup=1, num_checks=2, cache_dir=str(cache_dir), guards=(),
                       baselines=("eager",))
    info = device_info("cpu", "cpu")
    key = BaselineKey(task.code_hash, f"{info['name']}/{info['threads']}t", torch.__version__, "eager", "default", 5)
    # the evaluator's own settled timing, as an earlier evaluation cached it
    BaselineCache(cache_dir).put(key, TimingStats(0.2, 0.2, 0.19, 0.25, 0.01, 0.01, 5))
    solution = Solution(model_new=FORGER.model_new.replace("CACHE_DIR", repr(str(cache_dir))))

    first = evaluate(task, solution, opts)
    assert first.ok and first.reward.value == 1, (first.error, first.times_ms)
    assert first.times_ms["eager"] == 0.2 and first.metadata["baseline_cache"]["eager"]["source"] == "cache"
    assert re.search(r"eager: 0\.2000 ms median .*\(cached \d+ s ago, 5 runs\)", format_eval(first))
    forged = json.loads((cache_dir / "baselines.json").read_text())[key.text]
    assert forged["stats"]["median_ms"] == 1e6, "the attack did not happen: this test would prove nothing"

    second = evaluate(task, solution, opts)
    assert second.ok and second.reward.value == 1, (second.error, second.times_ms)
    assert second.times_ms["eager"] < 1000 and second.metadata["baseline_cache"]["eager"]["source"] == "timed"
    assert any("ignored the entry for eager" in note and "MAC does not verify" in note
               for note in second.metadata["notes"]), second.metadata.get("notes")
