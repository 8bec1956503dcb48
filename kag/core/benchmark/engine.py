"""``kag eval``'s engine: many episodes over a dataset, resumable, with the paper's summary table.

Each finished episode appends one line to ``results.jsonl`` as it ends, so a killed run loses at
most the episodes in flight and a rerun skips what is done. Summaries are rebuilt from that file.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from kag.core.benchmark.metrics import fast_p_curve, summarize
from kag.core.records import EvalResult, Task, append_jsonl, from_dict, read_jsonl, to_dict

FAST_P = [0.0, 0.5, 0.8, 1.0, 1.05, 1.2, 1.5, 2.0, 3.0]


def finished_tasks(out: Path) -> set[str]:
    """Tasks with a result line (a line cut by a kill is not one: that task runs again)."""
    return {row["task"] for row in load_results(out) if isinstance(row, dict) and "task" in row}


def load_results(out: Path) -> list[dict[str, Any]]:
    """Every result line so far (``run_all`` appends one as each episode ends)."""
    return read_jsonl(out / "results.jsonl")


def run_all(tasks: Iterable[Task], out: Path, run_one: Callable[[Task], tuple[Any, EvalResult | None, Any]],
            concurrency: int = 1, progress: Any = None) -> int:
    """Run ``run_one`` (-> trajectory, result, solution) on every unfinished task; append each
    result line as it ends.

    On KeyboardInterrupt (Ctrl-C) no episode starts any more and none still running is recorded:
    an episode cut short is not a failed one, and a rerun does it again. The interrupt is re-raised
    at once, without waiting for the episodes in flight (the caller ends their processes)."""
    out.mkdir(parents=True, exist_ok=True)
    done = finished_tasks(out)
    todo = [t for t in tasks if t.name not in done]
    lock = threading.Lock()
    interrupted = threading.Event()

    def one(task: Task) -> None:
        try:
            traj, result, solution = run_one(task)
            row = {"task": task.name, "level": task.level, "episode_id": getattr(traj, "episode_id", None),
                   "reward": getattr(traj, "reward", None), "stop_reason": getattr(traj, "stop_reason", ""),
                   "result": to_dict(result) if result is not None else None,
                   "solution": to_dict(solution) if solution is not None else None}
        except Exception as exc:  # one broken episode costs one failed result, never the run
            row = {"task": task.name, "level": task.level, "episode_id": None, "reward": None,
                   "stop_reason": f"error: {type(exc).__name__}: {exc}", "result": None, "solution": None}
        with lock:
            if not interrupted.is_set():
                append_jsonl(out / "results.jsonl", row)

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    try:
        futures = [pool.submit(one, t) for t in todo]
        for fut in as_completed(futures):
            fut.result()
            if progress is not None:
                progress()
    except KeyboardInterrupt:
        with lock:
            interrupted.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return len(todo)


def _result(row: dict[str, Any], task: str) -> EvalResult:
    if row.get("result"):
        return from_dict(EvalResult, row["result"])
    return EvalResult(task=task, error=row.get("stop_reason") or "no result", error_kind="exception")


def write_summary(out: Path) -> dict[str, Any]:
    """summary.json, summary.md, fast_p.png and KernelBench's result files (kernelbench/) from results.jsonl."""
    rows = load_results(out)
    groups: dict[str, list[EvalResult]] = {}
    for row in rows:
        result = _result(row, row["task"])
        groups.setdefault("overall", []).append(result)
        if row.get("level") is not None:
            groups.setdefault(f"level{row['level']}", []).append(result)
    table = {}
    for name in sorted(groups, key=lambda g: (g == "overall", g)):
        s = summarize(groups[name])
        table[name] = {**attrs.asdict(s),
                       "fast_p_compile": dict(zip(map(str, FAST_P), fast_p_curve(groups[name], FAST_P, "compile"))),
                       "fast_p_eager": dict(zip(map(str, FAST_P), fast_p_curve(groups[name], FAST_P, "eager")))}
    (out / "summary.json").write_text(json.dumps(table, indent=2) + "\n")
    (out / "summary.md").write_text(_markdown(table))
    if groups:
        _plot(groups["overall"], out / "fast_p.png")
        from kag.core.benchmark.kernelbench_format import export

        export(groups["overall"], out / "kernelbench")
    return table


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _markdown(table: dict[str, Any]) -> str:
    lines = ["| split | tasks | pass | faster vs eager | faster vs compile | geomean vs eager | geomean vs compile "
             "| fast_1 (compile) | fast_1 (eager) | mean reward |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in table.items():
        mean = "-" if s["mean_reward"] is None else f"{s['mean_reward']:.2f}"
        lines.append(f"| {name} | {s['tasks']} | {_pct(s['pass_rate'])} | {_pct(s['faster_than_eager'])} "
                     f"| {_pct(s['faster_than_compile'])} | {_x(s['geomean_vs_eager'])} "
                     f"| {_x(s['geomean_vs_compile'])} | {_pct(s['fast_p_compile']['1.0'])} "
                     f"| {_pct(s['fast_p_eager']['1.0'])} | {mean} |")
    return "\n".join(lines) + "\n\nFaster = at most 0.95x the baseline's time; geomeans over correct solutions; " \
                              "fast_p = fraction of all tasks correct with speed-up > p (KernelBench); against eager is " \
                              "KernelBench's default, against torch.compile the paper's.\n"


def _plot(results: list[EvalResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ps = [i / 20 for i in range(0, 81)]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(ps, fast_p_curve(results, ps, "eager"), label="vs eager")
    ax.plot(ps, fast_p_curve(results, ps, "compile"), label="vs torch.compile")
    ax.set_xlabel("speed-up threshold p")
    ax.set_ylabel("fast_p (fraction of tasks)")
    ax.set_ylim(0, 1.02)
    ax.axvline(1.0, color="grey", lw=0.5)
    ax.legend()
    ax.set_title(f"fast_p over {len(results)} tasks")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
