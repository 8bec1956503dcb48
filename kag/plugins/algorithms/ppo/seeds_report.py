"""One page for several runs of one config that differ only in their seed: the mean over seeds with
a band (min to max) per step, and each seed's first -> last numbers, so a learning claim rests on
more than one seed. Read from each run's ``metrics.jsonl`` files (a stage's ``output_dir`` or a
recipe's ``run_dir``); trusted side: reads only kag's own files.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from kag.plugin import read_jsonl
from kag.plugins.algorithms.ppo.config import STAGES
from kag.plugins.algorithms.ppo.report import first_last, label_axis, save_figure

# the keys a seeds page shows, in this order, when every run logged them
KEYS = ("reward_mean", "pass_frac", "faster_than_compile_frac", "right_frac")
FIRST_LAST_STEPS = 5


def run_stages(run: Path) -> dict[str, list[dict[str, Any]]]:
    """stage -> its metrics rows: a stage's own folder (``metrics.jsonl`` here) or a recipe's run
    folder (``STAGE/metrics.jsonl`` per stage)."""
    if (run / "metrics.jsonl").is_file():
        rows = read_jsonl(run / "metrics.jsonl")
        return {str(rows[0].get("stage", "stage")) if rows else "stage": rows}
    return {s: read_jsonl(run / s / "metrics.jsonl") for s in STAGES if (run / s / "metrics.jsonl").is_file()}


def per_step(runs: list[list[dict[str, Any]]], key: str) -> list[tuple[int, float, float, float]]:
    """(step, mean, min, max) of ``key`` over the runs, for the steps every run logged it at."""
    by_run = [{r["step"]: float(r[key]) for r in rows if isinstance(r.get(key), (int, float))} for rows in runs]
    steps = sorted(set.intersection(*(set(d) for d in by_run))) if by_run else []
    return [(s, statistics.fmean(d[s] for d in by_run), min(d[s] for d in by_run), max(d[s] for d in by_run))
            for s in steps]


def _band(values: list[float]) -> str:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.3f} ± {sd:.3f}"


def plot_seeds(stage: str, runs: list[list[dict[str, Any]]], keys: list[str], path: Path) -> None:
    """Mean over seeds per step, the band from the lowest to the highest seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.0), squeeze=False)
    for ax, key in zip(axes[0], keys):
        rows = per_step(runs, key)
        steps = [r[0] for r in rows]
        ax.plot(steps, [r[1] for r in rows], label=f"mean of {len(runs)} seeds")
        ax.fill_between(steps, [r[2] for r in rows], [r[3] for r in rows], alpha=0.25, label="min-max")
        label_axis(ax, key)
    save_figure(fig, f"{stage}: {len(runs)} seeds", path)


def write_seeds_report(run_dirs: list[str | Path], out: str | Path | None = None, plots: bool = True) -> Path:
    """``out`` (default: ``seeds_report.md`` beside the first run): per stage all runs share, the
    first -> last numbers per seed, their mean ± standard deviation, and curves with bands."""
    runs = [Path(d) for d in run_dirs]
    stages = [run_stages(r) for r in runs]
    for run, found in zip(runs, stages):
        if not found:
            raise FileNotFoundError(f"{run}: no metrics.jsonl here (nor STAGE/metrics.jsonl); point at a stage's "
                                    f"output_dir or a recipe's run_dir")
    shared = [s for s in stages[0] if all(s in found for found in stages[1:])]
    if not shared:
        raise FileNotFoundError(f"{', '.join(map(str, runs))}: no stage is in every run; give runs of one config")
    out = Path(out) if out else runs[0].parent / "seeds_report.md"
    lines = [f"# Training report over {len(runs)} runs", "",
             f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from {', '.join(f'`{r}`' for r in runs)} "
             f"(`kag train report {' '.join(map(str, runs))}` rebuilds it). First -> last: the mean of the first "
             f"and of the last {FIRST_LAST_STEPS} steps of each run; ± is the standard deviation over runs.", ""]
    for stage in shared:
        rows_of = [found[stage] for found in stages]
        keys = [k for k in KEYS if all(per_step([rows], k) for rows in rows_of)]
        lines += [f"## {stage}", "", "| run | seed | steps | " + " | ".join(keys) + " |",
                  "|---|---|---|" + "---|" * len(keys)]
        firsts: dict[str, list[float]] = {k: [] for k in keys}
        lasts: dict[str, list[float]] = {k: [] for k in keys}
        for run, rows in zip(runs, rows_of):
            cells = []
            for k in keys:
                pair = first_last(rows, k, FIRST_LAST_STEPS)
                assert pair is not None
                firsts[k].append(pair[0])
                lasts[k].append(pair[1])
                cells.append(f"{pair[0]:.3f} -> {pair[1]:.3f}")
            seed = _seed_of(rows)
            lines.append(f"| `{run}` | {seed} | {rows[-1]['step'] if rows else 0} | " + " | ".join(cells) + " |")
        lines.append("| **mean ± sd** | | | " + " | ".join(
            f"{_band(firsts[k])} -> {_band(lasts[k])}" for k in keys) + " |")
        lines.append("")
        if plots and keys:
            picture = out.with_name(f"{out.stem}_{stage}.png")
            plot_seeds(stage, rows_of, keys, picture)
            lines += [f"![{stage}: mean and band over runs]({picture.name})", ""]
    out.write_text("\n".join(lines))
    return out


def _seed_of(rows: list[dict[str, Any]]) -> str:
    """The seed the run logged in its rows ('?' for a run from before rows carried it)."""
    seeds = {r.get("seed") for r in rows} - {None}
    return ", ".join(map(str, sorted(seeds))) if seeds else "?"
