"""``kag eval``'s unit of work for an executor: one agent episode on one task, from plain data.

Trusted side: runs in the driver's threads (``local``) or in a Ray worker process, rebuilds the
plugins from their names, and plays the episode through the same Agent and trusted evaluator as
``kag run`` (every candidate in its own confined process).
"""

from __future__ import annotations

from typing import Any

from kag.core.executor import RESTART_WORKER, Job

EPISODE_FN = "kag.core.benchmark.jobs:episode"


def episode_job(task: Any, policy: str, policy_options: dict[str, Any], selection: dict[str, list[str]],
                config: Any, out_dir: str | None) -> Job:
    """The job for one episode. ``out_dir`` set: the worker writes the turn log and the trajectory
    there as today (it shares this machine's disk); None: the trajectory comes back in the value."""
    import attrs

    from kag.core.records import to_dict

    return Job(task.name, EPISODE_FN, {"task": to_dict(task), "policy": policy, "policy_options": policy_options,
                                       "selection": selection, "config": attrs.asdict(config), "out_dir": out_dir})


def episode_value(traj: Any, result: Any, solution: Any, trajectory: bool = False) -> dict[str, Any]:
    """An episode as plain data: what ``run_jobs`` writes as a result line."""
    from kag.core.records import to_dict

    return {"episode_id": getattr(traj, "episode_id", None), "reward": getattr(traj, "reward", None),
            "stop_reason": getattr(traj, "stop_reason", ""),
            "tools": traj.tool_counts() if traj is not None else None,
            "result": to_dict(result) if result is not None else None,
            "solution": to_dict(solution) if solution is not None else None,
            "trajectory": to_dict(traj) if trajectory and traj is not None else None,
            # a candidate's CUDA fault can leave the GPU's context unusable: the worker is replaced
            RESTART_WORKER: getattr(result, "error_kind", None) == "cuda_error"}


def episode(task: dict[str, Any], policy: str, policy_options: dict[str, Any], selection: dict[str, list[str]],
            config: dict[str, Any], out_dir: str | None) -> dict[str, Any]:
    from kag.core.agent.loop import Agent, AgentConfig
    from kag.core.agent.trajectory import TrajectoryWriter
    from kag.core.eval.orchestrator.evaluate import EvalOptions
    from kag.core.executor import worker_plugins
    from kag.core.records import Task, from_dict

    plugins = worker_plugins(selection)
    cfg = AgentConfig(**{**config, "eval_options": from_dict(EvalOptions, config["eval_options"])})
    writer = TrajectoryWriter(out_dir) if out_dir else None
    agent = Agent(plugins, plugins.create("policy", policy, **policy_options), plugins.create("sandbox"), cfg,
                  writer=writer, policy_name=policy)
    traj, solution = agent.run_episode(from_dict(Task, task))
    return episode_value(traj, traj.result, solution, trajectory=writer is None)
