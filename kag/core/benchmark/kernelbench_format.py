"""kag eval results in KernelBench's own result files, for its analysis script and leaderboards.

Neutral (results only). KernelBench's ``scripts/benchmark_eval_analysis.py`` reads
``runs/RUN/eval_results.json`` (problem id -> list of samples: ``sample_id``, ``compiled``,
``correctness``, ``metadata``, ``runtime`` in ms, ``runtime_stats``) and a baseline file
``{"levelL": {"ID_Name.py": {"mean", "std", "min", "max", "num_trials", ...}}}``. ``export`` writes
one ``eval_results.json`` per level and the eager and torch.compile baselines kag timed beside the
candidates (same inputs, same clock). KernelBench compares means (kag's verdicts use medians, which
a noisy run moves less), so its fast_p can differ from kag's summary by the tasks near a threshold::

    python scripts/benchmark_eval_analysis.py run_name=level1 level=1 hardware=H100 baseline=eager \\
        eval_results_dir=OUT/kernelbench baseline_file=OUT/kernelbench/baseline_eager.json
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from kag.core.records import EvalResult, TimingStats

KERNELBENCH_NAME = re.compile(r"^level(?P<level>\d+)/(?P<pid>\d+)_(?P<rest>.+)$")


def _stats(stats: TimingStats | None, mean: float | None, device: dict[str, Any]) -> dict[str, Any]:
    if stats is None:
        return {"mean": mean if mean is not None else -1.0}
    return {"mean": round(stats.mean_ms, 4), "std": round(stats.std_ms, 4), "min": round(stats.min_ms, 4),
            "max": round(stats.max_ms, 4), "num_trials": stats.n, "median": round(stats.median_ms, 4),
            "hardware": device.get("name"), "device": device.get("backend")}


def sample_entry(result: EvalResult) -> dict[str, Any]:
    """One KernelBench sample (sample_id 0: kag scores the episode's best solution)."""
    ok = result.ok
    stats = result.timing.get("candidate")
    credited = result.times_ms.get("candidate")
    mean = stats.mean_ms if stats else credited
    if stats and credited is not None and credited > stats.median_ms:  # floored at the judge path's resolution:
        mean = max(stats.mean_ms, credited)  # never exported as faster than kag credited it
    metadata: dict[str, Any] = {"kag_reward": result.reward.value if result.reward else None}
    if result.error:
        metadata.update(error_kind=result.error_kind, error=result.error[:2000])
    return {"sample_id": 0, "compiled": bool(result.compiled), "correctness": bool(ok), "metadata": metadata,
            "runtime": round(mean, 4) if ok and mean else -1.0,
            "runtime_stats": _stats(stats, mean, result.device) if ok and mean else {}}


def export(results: Iterable[EvalResult], folder: Path) -> list[Path]:
    """Write ``folder/levelL/eval_results.json`` and ``folder/baseline_{eager,compile}.json`` for
    the KernelBench tasks among ``results`` (names ``levelL/ID_Name``); returns the files written."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    baselines: dict[str, dict[str, dict[str, Any]]] = {"eager": {}, "compile": {}}
    for result in results:
        match = KERNELBENCH_NAME.match(result.task)
        if not match:
            continue
        level = f"level{match['level']}"
        runs.setdefault(level, {})[str(int(match["pid"]))] = [sample_entry(result)]
        problem = f"{match['pid']}_{match['rest']}.py"
        for name, table in baselines.items():
            mean = result.times_ms.get(name)
            if mean:
                table.setdefault(level, {})[problem] = _stats(result.timing.get(name), mean, result.device)
    written = []
    for level, entries in runs.items():
        path = folder / level / "eval_results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(sorted(entries.items(), key=lambda kv: int(kv[0]))), indent=2) + "\n")
        written.append(path)
    for name, table in baselines.items():
        if table:
            path = folder / f"baseline_{name}.json"
            path.write_text(json.dumps(table, indent=2) + "\n")
            written.append(path)
    return written
