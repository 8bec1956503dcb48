"""The ``replay`` policy: play back a recorded trajectory or a scripted list of tool calls, then stop.

For tests, demos and regression runs. A script is YAML or JSON: a list whose items are one turn
each, either ``{"tool": NAME, "args": {...}}`` (optionally with ``"content"``), ``{"calls": [{"tool":
..., "args": ...}, ...]}`` for several calls in one turn, or ``{"content": "text"}`` for a message
without tools (which ends the episode). A recorded trajectory is a ``trajectories.jsonl`` file
(pick one with ``episode``: index or episode id); its responses, token ids and log-probs are
replayed as they were. When ``path`` is a directory, ``reset(task=NAME)`` picks ``NAME.yaml``,
``NAME.yml`` or ``NAME.json`` from it, so one policy can replay solutions for many tasks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kag.plugin import Message, PolicyError, PolicyStep, ToolCall, Trajectory, hookimpl, load_trajectories, new_call_id

SCRIPT_SUFFIXES = (".yaml", ".yml", ".json")


def _load_data(path: Path) -> Any:
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PolicyError(f"{path}: not valid YAML: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"{path}: not valid JSON: {exc}") from None


def _call(item: Any, where: str) -> ToolCall:
    if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
        raise PolicyError(f"{where}: each call needs a 'tool' name and 'args' (e.g. "
                          f"{{tool: write, args: {{path: model_new.py, content: ...}}}}), got {item!r}")
    args = item.get("args", {})
    if not isinstance(args, dict):
        raise PolicyError(f"{where}: 'args' must be a mapping, got {type(args).__name__}")
    return ToolCall(id=str(item.get("id") or new_call_id()), name=item["tool"], arguments=dict(args))


def steps_from_script(items: Any, source: str) -> list[PolicyStep]:
    """Turn a scripted list (see the module doc) into policy steps; errors name the item."""
    if not isinstance(items, list):
        raise PolicyError(f"{source}: a replay script is a list of turns, got {type(items).__name__}")
    steps = []
    for i, item in enumerate(items):
        where = f"{source} item {i}"
        if not isinstance(item, dict):
            raise PolicyError(f"{where}: expected a mapping, got {item!r}")
        if "calls" in item:
            calls = [_call(c, f"{where} call {j}") for j, c in enumerate(item["calls"] or [])]
        elif "tool" in item:
            calls = [_call(item, where)]
        elif "content" in item:
            calls = []
        else:
            raise PolicyError(f"{where}: expected 'tool', 'calls' or 'content', got keys {sorted(item)}")
        message = Message(role="assistant", content=str(item.get("content") or ""), tool_calls=calls)
        steps.append(PolicyStep(message=message, finish_reason="tool_calls" if calls else "stop"))
    return steps


def steps_from_trajectory(traj: Trajectory) -> list[PolicyStep]:
    return [PolicyStep(message=t.response, finish_reason="tool_calls" if t.response.tool_calls else "stop",
                       prompt_token_ids=list(t.prompt_token_ids), response_token_ids=list(t.response_token_ids),
                       response_logprobs=list(t.response_logprobs), usage=dict(t.usage))
            for t in traj.turns]


def _pick_trajectory(path: Path, episode: int | str | None) -> Trajectory:
    try:
        trajs = load_trajectories(path)
    except ValueError as exc:  # names file:line
        raise PolicyError(str(exc)) from None
    if not trajs:
        raise PolicyError(f"{path}: no trajectories in the file")
    if episode is None:
        return trajs[0]
    if isinstance(episode, int) or (isinstance(episode, str) and episode.isdigit()):
        index = int(episode)
        if index >= len(trajs):
            raise PolicyError(f"{path}: episode index {index} out of range ({len(trajs)} trajectories)")
        return trajs[index]
    for traj in trajs:
        if traj.episode_id == episode:
            return traj
    raise PolicyError(f"{path}: no episode {episode!r}; ids: {', '.join(t.episode_id for t in trajs[:10])}")


def load_steps(path: Path, episode: int | str | None = None) -> list[PolicyStep]:
    if not path.exists():
        raise PolicyError(f"replay file {path} does not exist; give path=FILE (.yaml/.json script or .jsonl)")
    if path.suffix == ".jsonl":
        return steps_from_trajectory(_pick_trajectory(path, episode))
    if path.suffix not in SCRIPT_SUFFIXES:
        raise PolicyError(f"{path}: unknown replay format; use .yaml/.yml/.json scripts or .jsonl trajectories")
    return steps_from_script(_load_data(path), str(path))


class ReplayPolicy:
    """Replays fixed steps; after the last one it answers with a plain message (the episode ends)."""

    name = "replay"

    def __init__(self, path: str | None = None, calls: list[dict[str, Any]] | None = None,
                 episode: int | str | None = None) -> None:
        self.path = Path(path) if path else None
        self.episode = episode
        self.steps: list[PolicyStep] = []
        if calls is not None:
            self.steps = steps_from_script(calls, "calls")
        elif self.path is not None and not self.path.is_dir():
            self.steps = load_steps(self.path, episode)
        elif self.path is None:
            raise PolicyError("the replay policy needs path=FILE (a .yaml/.json script, a trajectories .jsonl, "
                              "or a directory of TASK.yaml scripts) or calls=[...]")
        self.position = 0

    def reset(self, task: str | None = None, **_: Any) -> None:
        """Start again from the first step; with a directory path, load the task's script."""
        self.position = 0
        if self.path is not None and self.path.is_dir():
            if task is None:
                raise PolicyError(f"replay path {self.path} is a directory: reset(task=NAME) must name the task")
            for suffix in SCRIPT_SUFFIXES:
                candidate = self.path / f"{task}{suffix}"
                if candidate.exists():
                    self.steps = load_steps(candidate)
                    return
            raise PolicyError(f"no replay script for task {task!r} in {self.path} "
                              f"(expected {task}.yaml, {task}.yml or {task}.json)")

    @property
    def remaining(self) -> int:
        return len(self.steps) - self.position

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyStep:
        if self.path is not None and self.path.is_dir() and not self.steps:
            raise PolicyError(f"replay path {self.path} is a directory: call reset(task=NAME) first")
        if self.position >= len(self.steps):
            return PolicyStep(message=Message(role="assistant", content="(replay finished)"), finish_reason="stop")
        step = self.steps[self.position]
        self.position += 1
        return step


@hookimpl
def kag_register_policies(register) -> None:
    register("replay", ReplayPolicy)
