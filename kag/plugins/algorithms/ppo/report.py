"""Curves and a one-page markdown report of a training run, read back from each stage's
``metrics.jsonl`` (the record every stage writes), so a report can be rebuilt at any time, also
of a run that is still going or was stopped. Trusted side: reads only kag's own files.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kag.plugin import read_jsonl
from kag.plugins.algorithms.ppo.config import STAGES

# one subplot per panel, drawn when the stage logged any of its keys
PANELS = (
    ("reward and success", ("reward_mean", "right_frac", "pass_frac", "faster_than_compile_frac", "kept_frac")),
    ("losses", ("policy_loss", "value_loss", "sft_loss")),
    ("critic: explained variance", ("explained_variance",)),
    ("policy drift", ("approx_kl", "kl_ref", "clip_frac", "kl_from_rollout")),
    ("entropy", ("entropy",)),
)
CURVES = "curves.png"


def stage_rows(stage_dir: Path) -> list[dict[str, Any]]:
    path = stage_dir / "metrics.jsonl"
    return read_jsonl(path) if path.is_file() else []


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    pairs = [(r["step"], float(r[key])) for r in rows if isinstance(r.get(key), (int, float))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def plot_stage(stage_dir: Path, stage: str) -> Path | None:
    """``stage_dir/curves.png``: the stage's curves by step (None when it logged nothing)."""
    rows = stage_rows(stage_dir)
    panels = [(title, [k for k in keys if _series(rows, k)[0]]) for title, keys in PANELS]
    panels = [(title, keys) for title, keys in panels if keys]
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.0), squeeze=False)
    for ax, (title, keys) in zip(axes[0], panels):
        for key in keys:
            steps, values = _series(rows, key)
            ax.plot(steps, values, label=key, marker="." if len(steps) < 30 else None)
        label_axis(ax, title)
    path = stage_dir / CURVES
    save_figure(fig, f"{stage} ({stage_dir})", path)
    return path


def label_axis(ax: Any, title: str) -> None:
    """The small-print style every panel of a report uses."""
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7)


def save_figure(fig: Any, title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def first_last(rows: list[dict[str, Any]], key: str, k: int = 5) -> tuple[float, float] | None:
    """Means of ``key`` over the first and the last ``k`` steps (fewer when the stage is short)."""
    _, values = _series(rows, key)
    if not values:
        return None
    k = max(1, min(k, len(values) // 2 or 1))
    return sum(values[:k]) / k, sum(values[-k:]) / k


def _fmt(pair: tuple[float, float] | None) -> str:
    return f"{pair[0]:.3f} -> {pair[1]:.3f}" if pair else "-"


def _mean(rows: list[dict[str, Any]], key: str) -> str:
    """Mean of a per-step value over the whole stage."""
    _, values = _series(rows, key)
    return f"{sum(values) / len(values):.3f}" if values else "-"


def stage_summary(stage: str, rows: list[dict[str, Any]]) -> dict[str, str]:
    """The numbers the report shows for one stage (strings, '-' where the stage has none)."""
    played = stage in ("warmup", "collect", "agentic")  # rft and value-pretrain train on collect's episodes
    reward_label = "reward (first -> last steps)" if played else "reward of the episodes trained on (first -> last)"
    out = {"steps": str(rows[-1]["step"]) if rows else "0", reward_label: _fmt(first_last(rows, "reward_mean"))}
    if stage == "rft" and rows:
        last = rows[-1]
        out["keep rate"] = f"{last.get('kept', 0)}/{last.get('collected', 0)} = {last.get('keep_rate', 0.0):.3f}"
        drops = {k[len("dropped_"):]: v for k, v in last.items() if k.startswith("dropped_") and v}
        out["dropped"] = ", ".join(f"{k} {v}" for k, v in drops.items()) or "none"
        out["sft loss"] = _fmt(first_last(rows, "sft_loss"))
    if stage == "collect":
        out["kept by the RFT filter"] = _mean(rows, "kept_frac")
    if stage in ("warmup", "agentic", "value-pretrain"):
        out["explained variance"] = _fmt(first_last(rows, "explained_variance"))
        out["value loss"] = _fmt(first_last(rows, "value_loss"))
    if any("right_frac" in r for r in rows):
        out["right (first -> last)"] = _fmt(first_last(rows, "right_frac"))
    if any("pass_frac" in r for r in rows):
        out["pass rate"] = _fmt(first_last(rows, "pass_frac"))
        out["faster than torch.compile"] = _fmt(first_last(rows, "faster_than_compile_frac"))
    _, tps = _series(rows, "tokens_per_s")
    if tps:
        out["tokens/s (mean)"] = f"{sum(tps) / len(tps):.0f}"
    _, secs = _series(rows, "step_s")
    if secs:
        out["wall (sum of steps)"] = f"{sum(secs):.1f} s"
    return out


def write_report(run_dir: str | Path, plots: bool = True) -> Path:
    """``run_dir/report.md``: per stage its curves and numbers, in recipe order; returns its path."""
    run_dir = Path(run_dir)
    present = [s for s in STAGES if (run_dir / s / "metrics.jsonl").is_file()]
    if not present:
        raise FileNotFoundError(f"{run_dir}: no stage metrics (STAGE/metrics.jsonl) here; point at a run "
                                f"directory (run_dir of `kag train recipe`)")
    lines = [f"# Training report: `{run_dir}`", "",
             f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from each stage's metrics.jsonl "
             f"(`kag train report {run_dir}` rebuilds it). Stages: {', '.join(present)}; "
             f"not run yet: {', '.join(s for s in STAGES if s not in present) or 'none'}.", ""]
    summaries = {s: stage_summary(s, stage_rows(run_dir / s)) for s in present}
    judged = [s for s in present if "pass rate" in summaries[s]]
    if judged:
        lines += ["## Kernel environment: pass and faster-than-compile rates per stage (first -> last steps)", "",
                  "| stage | pass rate | faster than torch.compile |", "|---|---|---|"]
        lines += [f"| {s} | {summaries[s]['pass rate']} | {summaries[s]['faster than torch.compile']} |" for s in judged]
        lines.append("")
    for stage in present:
        lines += [f"## {stage}", "", "| | |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in summaries[stage].items()]
        lines.append("")
        curves = plot_stage(run_dir / stage, stage) if plots else run_dir / stage / CURVES
        if curves is not None and curves.is_file():
            lines += [f"![{stage} curves]({stage}/{CURVES})", ""]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
