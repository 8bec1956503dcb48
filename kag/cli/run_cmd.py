"""``kag run``: optimise one task with an agent; leave the best solution as a workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kag.cli.common import agent_options, make_agent_parts, make_plugins, quiet_option, tools_line, user_errors


@click.command(epilog=(
    "Policies: replay (the default; --policy-option path=FILE, a .json/.yaml list of assistant messages "
    "or a trajectories .jsonl), openai (an OpenAI-compatible endpoint: --policy-option base_url=URL "
    "--policy-option model=NAME), hf, vllm, and human: you play the model. Each turn shows what is new "
    "(task, tool results), then reads one action: TOOL {json arguments}, e.g. "
    "read {\"path\": \"model.py\"}; the JSON may span lines until it parses. 'tools' lists the tools "
    "and their parameters, 'help' the syntax, 'done' (or end of input) finishes."))
@click.option("--task", "task_spec", required=True, metavar="FILE_OR_ID",
              help="A task .py file or a dataset id such as kernelbench:level1/19.")
@agent_options
@quiet_option
@user_errors
def run(task_spec: str, policy: str | None, policy_pairs: tuple[str, ...], backend: str, max_turns: int,
        max_context_tokens: int, num_timed: int, out_dir: str, plugin_pairs: tuple[str, ...],
        config_path: str | None, quiet: bool) -> None:
    """Run one episode on TASK and write OUT/workspace (best solution), summary.json and the trajectory.

    Exit status: 0 the final solution passed, 1 it failed or there is none (reward -1), 2 bad usage or
    input."""
    from kag.cli.score_cmd import resolve_task
    from kag.core.agent.loop import Agent
    from kag.core.records import to_dict
    from kag.core.eval.orchestrator.feedback import format_eval
    from kag.core.agent.trajectory import TrajectoryWriter, render_transcript
    from kag.core.agent.workspace import make_workspace, write_solution

    plugins, config = make_plugins(plugin_pairs, config_path)
    task = resolve_task(task_spec, plugins, config)
    name, opts, cfg = make_agent_parts(plugins, config, policy, policy_pairs, backend, max_turns,
                                       max_context_tokens, num_timed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    show = not quiet  # a line per turn on a terminal or off it (a log file, CI): long runs are never silent
    agent = Agent(plugins, plugins.create("policy", name, **opts), plugins.create("sandbox"), cfg,
                  writer=TrajectoryWriter(out), policy_name=name, on_turn=describe_turn if show else None)
    click.echo(f"kag run: {task.name} with policy {name} on {cfg.eval_options.backend} "
               f"(sandbox {plugins.selected('sandbox')}, reward {plugins.selected('reward')})", err=True)
    traj, solution = agent.run_episode(task)
    best = out / "workspace"
    if solution is not None:
        if best.exists():
            import shutil

            shutil.rmtree(best)
        make_workspace(task, best, backend=cfg.eval_options.backend)
        write_solution(solution, best)
    result = traj.result
    tools = traj.tool_counts()
    summary = {"task": task.name, "episode_id": traj.episode_id, "stop_reason": traj.stop_reason,
               "turns": len(traj.turns), "tools": tools, "reward": traj.reward, "policy": name,
               "speedup_vs_eager": result.speedup_vs_eager if result else None,
               "speedup_vs_compile": result.speedup_vs_compile if result else None,
               "times_ms": result.times_ms if result else {}, "workspace": str(best),
               "result": to_dict(result) if result else None}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "transcript.md").write_text(render_transcript(traj, max_chars=None) + "\n")
    click.echo(f"{len(traj.turns)} turns, stopped: {traj.stop_reason}; {tools_line(tools)}")
    if result is not None:
        click.echo(format_eval(result))
    click.echo(f"best solution: {best}   trajectory: {out / 'trajectories.jsonl'}")
    raise SystemExit(0 if result is not None and result.ok else 1)


def describe_turn(turn: Any) -> None:
    """One line per turn on stderr: the tools called, each evaluation's verdict, the seconds."""
    calls = ", ".join(call.name + (f" {call.arguments.get('path')}" if isinstance(call.arguments, dict)
                                   and call.arguments.get("path") else "") for call in turn.response.tool_calls)
    verdicts = "".join(f"; {'PASS' if r.ok else 'FAIL'}" + (f" {r.speedup_vs_eager:.2f}x eager" if r.speedup_vs_eager
                                                            else "") for r in turn.eval_results)
    failed = f"; {turn.tool_errors} failed" + (f" ({turn.tool_timeouts} timed out)" if turn.tool_timeouts else "") \
        if turn.tool_errors else ""
    click.echo(f"turn {turn.index + 1}: {calls or 'no tool call'}{verdicts}{failed} ({turn.elapsed_s:.1f} s)", err=True)
