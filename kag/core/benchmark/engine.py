"""``kag eval``'s engine: many episodes over a dataset, resumable, with the paper's summary table.

Each finished episode appends one line to ``results.jsonl`` as it ends, so a killed run loses at
most the episodes in flight and a rerun skips what is done. Summaries are rebuilt from that file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from kag.core.benchmark.metrics import fast_p_curve, summarize
from kag.core.executor import Job
from kag.core.records import EvalResult, Task, append_jsonl, from_dict, read_jsonl, to_dict

EXECUTOR_FILE = "executor.jsonl"  # one line per invocation: the executor's counts
FAST_P = [0.0, 0.5, 0.8, 1.0, 1.05, 1.2, 1.5, 2.0, 3.0]


def finished_tasks(out: Path) -> set[str]:
    """Tasks with a result line (a line cut by a kill is not one: that task runs again)."""
    return {row["task"] for row in load_results(out) if isinstance(row, dict) and "task" in row}


def load_results(out: Path) -> list[dict[str, Any]]:
    """Every result line so far (``run_all`` appends one as each episode ends)."""
    return read_jsonl(out / "results.jsonl")


def run_all(tasks: Iterable[Task], out: Path, run_one: Callable[[Task], tuple[Any, EvalResult | None, Any]],
            concurrency: int = 1, progress: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Run ``run_one`` (-> trajectory, result, solution) on every unfinished task in threads of this
    process (the ``local`` executor); see ``run_jobs``."""
    from kag.core.benchmark.jobs import episode_value
    from kag.core.executor import LocalExecutor

    def job(task: Task) -> Job:
        return Job(task.name, lambda: episode_value(*run_one(task)))

    return run_jobs(tasks, out, LocalExecutor(), job, concurrency, progress=progress)


def run_jobs(tasks: Iterable[Task], out: Path, executor: Any, make_job: Callable[[Task], Job], workers: int = 1,
             gpu: bool = False, progress: Callable[[dict[str, Any]], None] | None = None,
             on_value: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Submit one job per unfinished task (``make_job``) to ``executor``; append each result line as
    its outcome arrives (completion order), so a killed run loses only the episodes in flight.

    ``on_value`` sees each episode's value first (e.g. to write a trajectory that came back from
    another machine). On KeyboardInterrupt (Ctrl-C) nothing more is recorded and the interrupt goes
    on at once: the executor drops what is queued and the caller ends the processes in flight.
    ``progress`` sees each result line once it is written.
    The executor's counts (workers, retries, lost workers) are appended to ``executor.jsonl``."""
    out.mkdir(parents=True, exist_ok=True)
    done = finished_tasks(out)
    todo = {t.name: t for t in tasks if t.name not in done}
    outcomes = executor.map_unordered((make_job(t) for t in todo.values()), workers, gpu=gpu)
    try:
        for outcome in outcomes:
            task = todo[outcome.key]
            value = outcome.value if outcome.error is None and isinstance(outcome.value, dict) else {}
            if on_value is not None and value:
                on_value(value)
            row = {"task": task.name, "level": task.level, "episode_id": value.get("episode_id"),
                   "reward": value.get("reward"), "stop_reason": value.get("stop_reason", ""),
                   "result": value.get("result"), "solution": value.get("solution"), "tools": value.get("tools")}
            if outcome.error is not None:
                row["stop_reason"] = f"error: {outcome.error}"
            if outcome.attempts > 1:
                row["attempts"] = outcome.attempts
            append_jsonl(out / "results.jsonl", row)
            if progress is not None:
                progress(row)
    except KeyboardInterrupt:  # the caller ends every process; a Ctrl-C may have stopped a local cluster too
        raise
    except BaseException:
        outcomes.close()
        raise
    if todo:
        append_jsonl(out / EXECUTOR_FILE, attrs.asdict(executor.stats))
    return len(todo)


def executor_totals(out: Path) -> dict[str, Any] | None:
    """Retries, lost and restarted workers summed over every invocation of a run (None: none logged)."""
    rows = read_jsonl(out / EXECUTOR_FILE)
    if not rows:
        return None
    keys = ("jobs", "retries", "lost_workers", "restarted_workers")
    return {"invocations": len(rows), "executors": sorted({r.get("executor", "") for r in rows}),
            **{k: sum(int(r.get(k, 0)) for r in rows) for k in keys}}


def _result(row: dict[str, Any], task: str) -> EvalResult:
    if row.get("result"):
        return from_dict(EvalResult, row["result"])
    return EvalResult(task=task, error=row.get("stop_reason") or "no result", error_kind="exception")


def write_summary(out: Path) -> dict[str, Any]:
    """summary.json, summary.md, fast_p.png and KernelBench's result files (kernelbench/) from results.jsonl."""
    rows = load_results(out)
    groups: dict[str, list[EvalResult]] = {}
    tools: dict[str, dict[str, int]] = {}  # the agents' tool calls, failures and timeouts, per split
    for row in rows:
        result = _result(row, row["task"])
        for name in ["overall"] + ([f"level{row['level']}"] if row.get("level") is not None else []):
            groups.setdefault(name, []).append(result)
            counts = tools.setdefault(name, {"calls": 0, "errors": 0, "timeouts": 0})
            for key in counts:
                counts[key] += int((row.get("tools") or {}).get(key, 0))
    table = {}
    for name in sorted(groups, key=lambda g: (g == "overall", g)):
        s = summarize(groups[name])
        table[name] = {**attrs.asdict(s), "tool_calls": tools[name]["calls"], "tool_errors": tools[name]["errors"],
                       "tool_timeouts": tools[name]["timeouts"],
                       "fast_p_compile": dict(zip(map(str, FAST_P), fast_p_curve(groups[name], FAST_P, "compile"))),
                       "fast_p_eager": dict(zip(map(str, FAST_P), fast_p_curve(groups[name], FAST_P, "eager")))}
    totals = executor_totals(out)
    (out / "summary.json").write_text(json.dumps({**table, "executor": totals} if totals else table, indent=2) + "\n")
    (out / "summary.md").write_text(_markdown(table) + _executor_line(totals))
    if groups:
        _plot(groups["overall"], out / "fast_p.png")
        from kag.core.benchmark.kernelbench_format import export

        export(groups["overall"], out / "kernelbench")
    return table


def _executor_line(totals: dict[str, Any] | None) -> str:
    if not totals:
        return ""
    return (f"\nExecutor ({', '.join(totals['executors'])}, {totals['invocations']} invocation(s)): "
            f"{totals['jobs']} jobs, {totals['retries']} retried after a lost worker, "
            f"{totals['lost_workers']} workers lost, {totals['restarted_workers']} restarted.\n")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _markdown(table: dict[str, Any]) -> str:
    lines = ["| split | tasks | pass | faster vs eager | faster vs compile | geomean vs eager | geomean vs compile "
             "| fast_1 (compile) | fast_1 (eager) | mean reward | tool calls (failed, timed out) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in table.items():
        mean = "-" if s["mean_reward"] is None else f"{s['mean_reward']:.2f}"
        lines.append(f"| {name} | {s['tasks']} | {_pct(s['pass_rate'])} | {_pct(s['faster_than_eager'])} "
                     f"| {_pct(s['faster_than_compile'])} | {_x(s['geomean_vs_eager'])} "
                     f"| {_x(s['geomean_vs_compile'])} | {_pct(s['fast_p_compile']['1.0'])} "
                     f"| {_pct(s['fast_p_eager']['1.0'])} | {mean} "
                     f"| {s['tool_calls']} ({s['tool_errors']}, {s['tool_timeouts']}) |")
    return "\n".join(lines) + "\n\nFaster = at most 0.95x the baseline's time; geomeans over correct solutions; " \
                              "fast_p = fraction of all tasks correct with speed-up > p (KernelBench); against eager is " \
                              "KernelBench's default, against torch.compile the paper's. Tool calls: the agents' over " \
                              "all episodes, with those that failed and those that ran out of time (a failure too).\n"


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
