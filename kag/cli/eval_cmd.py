"""``kag eval``: run the agent over a dataset and write the paper's table (resumable)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from kag.cli.common import (agent_options, interrupted, make_agent_parts, make_executor, make_plugins, open_dataset,
                            ray_address_option, stop_started_processes, tools_line, user_errors)


@click.command(name="eval")
@click.option("--dataset", "dataset_spec", required=True, metavar="NAME[:PATH]",
              help="e.g. kernelbench:~/KernelBench, ops6k:data.parquet, local:tasks/")
@click.option("--level", help="KernelBench level(s), e.g. 1 or 1,2.")
@click.option("--ids", help="Problem ids / row numbers, e.g. 1-20,23.")
@click.option("--concurrency", type=click.IntRange(1),
              help="Episodes at once [default: 1; with --plugin executor=ray on a GPU backend, one per GPU of "
                   "the cluster] (local: evaluations share the GPU pool, one GPU each while timing).")
@click.option("--timeline", is_flag=True,
              help="Also write OUT/timeline.jsonl: each worker's phases (policy, tools, builds, waits for a slot, "
                   "the judge's reference, checks, baselines and timing); bench/scripts/scale.py --draw draws it.")
@ray_address_option
@agent_options
@user_errors
def eval_(dataset_spec: str, level: str | None, ids: str | None, concurrency: int | None, timeline: bool,
          ray_address: str | None, policy: str | None, policy_pairs: tuple[str, ...], backend: str, max_turns: int,
          max_context_tokens: int, num_timed: int, out_dir: str, plugin_pairs: tuple[str, ...],
          config_path: str | None) -> None:
    """Run one episode per task; write results.jsonl, summary.md/json and fast_p.png to OUT."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kag.core.agent.trajectory import TrajectoryWriter
    from kag.core.benchmark.engine import finished_tasks, run_jobs, write_summary
    from kag.core.benchmark.jobs import episode_job
    from kag.core.records import Trajectory, from_dict

    plugins, config = make_plugins(plugin_pairs, config_path)
    loaded = open_dataset(plugins, config, dataset_spec, level=level, ids=ids).load()
    for s in loaded.skipped:
        click.echo(f"kag: skipped {s.path}: {s.reason}", err=True)
    name, opts, cfg = make_agent_parts(plugins, config, policy, policy_pairs, backend, max_turns,
                                       max_context_tokens, num_timed)
    plugins.create("policy", name, **opts)  # bad policy options fail now, not in every episode
    plugins.create("sandbox")  # and a sandbox that cannot start here (no Docker daemon)
    executor = make_executor(plugins, config, ray_address)
    out = Path(out_dir)
    writer = TrajectoryWriter(out)
    if timeline:  # before any judge starts: they inherit it (kag.core.timeline)
        import os

        out.mkdir(parents=True, exist_ok=True)
        os.environ["KAG_TIMELINE"] = str((out / "timeline.jsonl").resolve())
    # local jobs write their turn logs and trajectories here as they go; remote ones send them back
    job_out = str(out) if executor.name == "local" else None

    def make_job(task):
        return episode_job(task, name, opts, plugins.names_selected(), cfg, job_out)

    def on_value(value):
        if value.get("trajectory"):
            writer.finish(from_dict(Trajectory, value["trajectory"]))

    done = finished_tasks(out)
    todo = sum(1 for t in loaded.tasks if t.name not in done)
    click.echo(f"kag eval: {len(loaded.tasks)} tasks ({len(loaded.tasks) - todo} already done) with policy {name} "
               f"on {cfg.eval_options.backend}, executor {executor.name}, concurrency {concurrency or 'auto'}", err=True)
    gpu = cfg.eval_options.backend != "cpu"
    terminal = sys.stderr.isatty()
    try:
        # a bar on a terminal; off it (a log file, CI) a line per finished episode instead
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      transient=False, disable=not terminal) as progress:
            bar = progress.add_task("episodes", total=todo)
            ended = [0, time.monotonic()]

            def finished(row: dict) -> None:
                ended[0] += 1
                if terminal:
                    progress.advance(bar)
                else:
                    click.echo(f"kag eval: {ended[0]}/{todo} {episode_line(row)} "
                               f"({time.monotonic() - ended[1]:.0f} s)", err=True)

            if gpu and executor.name == "local":  # judges started ahead for each episode in flight
                from kag.core.eval.orchestrator.judge_process import JUDGES_PER_EPISODE, keep_judges_warm

                keep_judges_warm(JUDGES_PER_EPISODE * (concurrency or 1))
            workers = concurrency or (None if executor.name != "local" else 1)
            run_jobs(loaded.tasks, out, executor, make_job, workers, gpu=gpu, progress=finished, on_value=on_value)
    except KeyboardInterrupt:  # Ctrl-C: the episodes in flight end unrecorded, the summary covers the rest
        stop_started_processes()
        finished = len(finished_tasks(out))
        if finished:
            write_summary(out)
            click.echo((out / "summary.md").read_text())
        where = f" (results: {out / 'results.jsonl'})" if finished else ""
        interrupted(f"kag eval: interrupted; {finished} of {len(loaded.tasks)} tasks finished{where}; "
                    f"the same command resumes with the rest")
    write_summary(out)
    click.echo((out / "summary.md").read_text())
    click.echo(f"results: {out / 'results.jsonl'}  plot: {out / 'fast_p.png'}")
    if timeline and not (out / "timeline.jsonl").exists():  # workers on other nodes write on their own disks
        click.echo(f"timeline: no spans were written to {out / 'timeline.jsonl'} on this machine", err=True)
    elif timeline:
        from kag.core.timeline import read, summarize

        top = list(summarize(read(str(out / "timeline.jsonl"))).items())[:8]
        click.echo(f"timeline: {out / 'timeline.jsonl'} (python bench/scripts/scale.py --draw FILE); seconds summed over "
                   f"workers: " + ", ".join(f"{k} {v['seconds']:.1f}" for k, v in top))


def episode_line(row: dict[str, Any]) -> str:
    """One finished episode: its task, verdict, reward, and what its tool calls met."""
    from kag.core.records import EvalResult, from_dict

    result = from_dict(EvalResult, row["result"]) if row.get("result") else None
    if result is not None:
        verdict = "PASS" if result.ok else f"FAIL ({result.error_kind or 'incorrect'})"
    else:
        verdict = f"no result ({row.get('stop_reason') or 'unknown'})"
    speed = result.speedup_vs_eager if result is not None else None
    tools = f"; {tools_line(row['tools'])}" if row.get("tools") else ""
    return f"{row['task']}: {verdict}{f' {speed:.2f}x eager' if speed else ''}, reward {row.get('reward')}{tools}"
