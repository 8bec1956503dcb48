"""The example plugin's training kinds, written only against ``kag.plugin``: something to act, something
to act in, a stage that plays them, and somewhere its numbers go. None needs torch, a GPU or a model.

- environment ``example-echo``: the user says ``say WORD``; answering WORD scores 1, anything else 0;
- policy ``example-parrot``: answers the last word it was told (or always ``answer``), no model;
- algorithm ``example-best-of-n``: an evaluation-only stage: plays n episodes on each of ``tasks`` tasks
  sampled from the configured environment with the configured policy, logs each task's mean and best
  reward through the configured loggers and returns the mean reward and the best-of-n reward;
- logger ``example-csv``: each step's metrics as ``step,metric,value`` rows of ``OUT/metrics.csv``.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path
from typing import Any

from kag.plugin import Message, Plugins, PolicyStep, StepResult, hookimpl, play_episode


class EchoEnv:
    """``say WORD`` -> reward 1 for WORD (case and spaces aside), else 0; one turn. Small enough to
    check by hand: an environment is three methods, and every trainer and stage sees only text."""

    def __init__(self, words: list[str] | tuple[str, ...] = ("kernel", "warp", "block", "grid")):
        self.words = [str(w) for w in words]
        if not self.words or any(len(w.split()) != 1 for w in self.words):
            raise ValueError(f"example-echo: words must be a non-empty list of single words, got {words!r}")
        self.target: str | None = None

    def sample_tasks(self, n: int, rng: random.Random) -> list[str]:
        return [rng.choice(self.words) for _ in range(n)]

    def reset(self, task: str) -> list[Message]:
        self.target = str(task)
        return [Message(role="user", content=f"say {task}")]

    def step(self, action: str) -> StepResult:
        if self.target is None:
            raise RuntimeError("example-echo: step() before reset() or after the episode ended")
        right = action.strip().lower() == self.target.lower()
        self.target = None
        return StepResult(None, 1.0 if right else 0.0, True, {"right": right})


class ParrotPolicy:
    """Answers the last word of the last message, or always ``answer`` when set: a rule, not a model,
    so a stage, an environment or a logger can be tried end to end with no GPU, weights or API key."""

    def __init__(self, answer: str | None = None):
        self.answer = answer

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyStep:
        words = messages[-1].content.split() if messages else []
        text = self.answer if self.answer is not None else (words[-1] if words else "")
        return PolicyStep(message=Message(role="assistant", content=text), finish_reason="stop")


class BestOfN:
    """What a policy scores before any training, with ``kag train``'s algorithm contract: made from the
    config's tables, ``run()`` returns the summary. It reads ``[train]`` then ``[train.STAGE]`` (keys
    below) and each plugin's options from ``[environments.NAME]``, ``[policies.NAME]``, ``[loggers.NAME]``;
    ``policy`` defaults to the one chosen with ``[plugins] policy`` or ``--plugin policy=NAME``."""

    KEYS: dict[str, Any] = {"environment": "example-echo", "policy": None, "tasks": 8, "n": 1, "max_turns": 1,
                            "seed": 0, "run_dir": None, "output_dir": None, "loggers": []}

    def __init__(self, config_data: dict[str, Any], stage: str = "example-best-of-n", where: str = "config",
                 plugins: Plugins | None = None):
        train, self.data, self.stage, self.plugins = config_data.get("train", {}), config_data, stage, plugins
        unknown = sorted(set(train.get(stage, {})) - set(self.KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown [train.{stage}] key(s) {', '.join(unknown)}; "
                             f"valid keys: {', '.join(self.KEYS)}")
        table = {**{k: v for k, v in train.items() if k in self.KEYS}, **train.get(stage, {})}
        self.settings = {k: table.get(k, default) for k, default in self.KEYS.items()}
        if min(int(self.settings[k]) for k in ("tasks", "n", "max_turns")) < 1:
            raise ValueError(f"{where}: [train.{stage}] tasks, n and max_turns must be >= 1")

    def options(self, kinds: str, name: str) -> dict[str, Any]:
        return dict(self.data.get(kinds, {}).get(name, {}))

    def episode(self, env: Any, policy: Any, task: Any) -> float:
        """One episode's reward: kag.plugin.play_episode plays it as kag's own stages do (reset,
        act, step, and the environment's ``truncate()`` where ``max_turns`` ends it)."""
        return play_episode(env, policy, task, max_turns=int(self.settings["max_turns"]),
                            env_name=self.settings["environment"]).reward

    def run(self) -> dict[str, Any]:
        s, plugins = self.settings, self.plugins or Plugins()
        policy_name = s["policy"] or plugins.selected("policy")
        env = plugins.create("environment", s["environment"], **self.options("environments", s["environment"]))
        policy = plugins.create("policy", policy_name, **self.options("policies", policy_name))
        out = Path(s["output_dir"] or Path(s["run_dir"] or "runs/train") / self.stage)
        sinks = [plugins.create("logger", name, out_dir=out, stage=self.stage, config=dict(s),
                                **self.options("loggers", name)) for name in s["loggers"]]
        means, bests = [], []
        try:
            for step, task in enumerate(env.sample_tasks(int(s["tasks"]), random.Random(s["seed"])), start=1):
                rewards = [self.episode(env, policy, task) for _ in range(int(s["n"]))]
                means.append(sum(rewards) / len(rewards))
                bests.append(max(rewards))
                for sink in sinks:
                    sink.log(step, {"reward": means[-1], "best": bests[-1]})
        finally:
            for sink in sinks:
                sink.close()
        return {"stage": self.stage, "environment": s["environment"], "policy": policy_name, "tasks": len(means),
                "n": int(s["n"]), "mean_reward": sum(means) / len(means), "best_of_n": sum(bests) / len(bests),
                "output_dir": str(out)}


class CsvSink:
    """``step,metric,value`` rows appended to ``out_dir/file``: a file any spreadsheet or pandas reads,
    one row per number, so steps that log different metrics need no changing header."""

    def __init__(self, out_dir: str | Path, stage: str, config: dict[str, Any] | None = None,
                 file: str = "metrics.csv", **_: Any):
        self.path = Path(out_dir) / file
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.is_file() or self.path.stat().st_size == 0
        self.handle = self.path.open("a", newline="")
        self.writer = csv.writer(self.handle)
        if new:
            self.writer.writerow(["step", "metric", "value"])

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.writer.writerows([step, key, value] for key, value in metrics.items())
        self.handle.flush()  # what was logged survives a crash

    def close(self) -> None:
        self.handle.close()


@hookimpl
def kag_register_environments(register):
    register("example-echo", EchoEnv)


@hookimpl
def kag_register_policies(register):
    register("example-parrot", ParrotPolicy)


@hookimpl
def kag_register_algorithms(register):
    register("example-best-of-n", BestOfN)


@hookimpl
def kag_register_loggers(register):
    register("example-csv", CsvSink)
