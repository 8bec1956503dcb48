"""The CUDA-kernel environments RL stages train on: ``kernel-single`` and ``kernel-agentic``.

Both score with the trusted evaluator (``kag.core.eval.orchestrator.evaluate``) and the selected reward plugin, so
training sees exactly the reward ``kag run``/``kag eval`` give. ``kernel-single`` (the warm-up
stage's environment) asks for a whole solution in one message, files in fenced blocks labelled by
path. ``kernel-agentic`` is the agent loop as an environment: each step is one model message whose
``<tool_call>`` blocks run in the episode ``kag run`` uses too (``kag.core.agent.episode.Episode``: a
sandbox, with compile/verify/profile answered through the evaluation bridge); the episode's reward
is the best solution seen, re-scored at the end (both by the sandbox's own evaluator when it has
one: with docker, no solution code runs on the host). Options (``[environments.kernel-single]`` in
a train config): dataset ("kernelbench:PATH", "local:DIR", "ops6k:FILE"), level, ids, backend
(auto, cuda, cpu, nvrtc or a plugin's), num_timed, warmup, tolerance, reward; kernel-agentic adds max_turns,
sandbox, sandbox_options, tools.

Trusted side: this runs in the trainer, outside the sandbox; the model's answers are only parsed
here (``parse_solution_blocks``), and the agent's workspace is read only through the episode.
"""

from __future__ import annotations

import functools
import json
import re
import weakref
from typing import Any

from kag.plugin import (AnswerFormatError, Episode, EvalResult, Message, SYSTEM_PROMPT, StepResult, Task, failed_result,
                        hookimpl, parse_solution_blocks, task_prompt)

SKILL_KEEP_STEP = "2. **Write**"

SINGLE_SYSTEM = """\
You are an expert CUDA performance engineer. You get a PyTorch reference model (model.py) and must
write a faster implementation that produces the same outputs: model_new.py plus your own kernels in
kernels/. You have no tools in this task: answer with the complete solution in one message. It is
compiled, checked for correctness and timed after you answer. The rules from SKILL.md:
"""

TOOL_FORMAT = """\
Call a tool by writing a block <tool_call>{"name": TOOL, "arguments": {...}}</tool_call> (JSON, one
call per block; several blocks run in order). A message without a tool call ends the episode. Tools:
"""


def answer_format(backend: str) -> str:
    kernel = "```cpp kernels/foo.cpp" if backend == "cpu" else "```cuda kernels/foo.cu"
    return ("\nAnswer with every file of your solution in a fenced block whose opening line gives the "
            "language and the file's path:\n\n```python model_new.py\n...\n```\n"
            f"{kernel}\n...\n```\n```cpp kernels/foo_binding.cpp\n...\n```\n\n"
            "Only model_new.py and files under kernels/ are accepted, and every fenced block must be "
            "one of them.\n")


@functools.lru_cache(maxsize=4)
def skill_summary(backend: str) -> str:
    """SKILL.md without the tool workflow (single-turn answers cannot compile or profile): the
    intro, files, how to write kernels, what is allowed and forbidden, and the CPU notes on cpu."""
    from kag.plugin import skill_text

    text = skill_text()
    out = []
    for section in re.split(r"(?m)^(?=## )", text):
        title = section.splitlines()[0] if section.strip() else ""
        if title.startswith("## Workflow"):
            step = section[section.find(SKILL_KEEP_STEP):]
            section = "## How to write the kernels\n\n" + step[:step.find("\n3. ")].strip() + "\n\n"
        elif title.startswith("## CPU backend") and backend != "cpu":
            continue
        out.append(section)
    return "".join(out).strip() + "\n"


@functools.lru_cache(maxsize=16)
def _load_tasks(dataset: str, level: Any, ids: Any) -> tuple[Task, ...]:
    from kag.plugin import Plugins
    from kag.plugin import parse_dataset_spec

    name, path = parse_dataset_spec(dataset)
    opts = {k: v for k, v in (("path", path), ("level", level), ("ids", ids)) if v is not None}
    loaded = Plugins().create("dataset", name, **opts).load()
    if not loaded.tasks:
        why = "; ".join(f"{s.path}: {s.reason}" for s in loaded.skipped[:3]) if loaded.skipped else "no task files"
        raise ValueError(f"dataset {dataset!r} (level={level}, ids={ids}) has no usable task ({why}); "
                         f"check the path and the level/ids filters")
    return tuple(loaded.tasks)


def _resolve_backend(backend: str, plugins: Any) -> str:
    from kag.plugin import pick_backend

    names = sorted(plugins.registry.get("backend", {}))
    if backend != "auto" and backend not in names:
        raise ValueError(f"kernel environment: backend must be auto or one of {', '.join(names)}, got {backend!r}")
    return pick_backend(backend)


def _freeze(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _result_info(result: EvalResult) -> dict[str, Any]:
    """The verdict in a step's info; a failed one says why (``reason``, as every other failure does)."""
    info = {"right": result.ok, "compiled": result.compiled, "correct": result.correct,
            "error_kind": result.error_kind, "speedup_vs_eager": result.speedup_vs_eager,
            "speedup_vs_compile": result.speedup_vs_compile, "eval_s": result.durations_s.get("total")}
    if result.error:
        info["reason"] = result.error
    return info


class KernelEnvBase:
    """Tasks from a dataset plugin, the evaluator's options, and the reward of a failure."""

    def __init__(self, dataset: str | None = None, level: Any = None, ids: Any = None, backend: str = "auto",
                 num_timed: int = 20, warmup: int = 3, tolerance: str | None = None, reward: str | None = None,
                 plugins: Any = None, pool: Any = None, tasks: dict[str, Task] | None = None):
        """``pool``: where evaluations run (None: this machine's GPU pool; an RL stage with an
        executor passes its kag.core.eval.serve.remote.ExecutorEvaluations). ``tasks``: already read by a
        subclass (then ``dataset`` is not used)."""
        from kag.plugin import EvalOptions
        from kag.plugin import Plugins

        if tasks is None and not dataset:
            raise ValueError('kernel environment: set dataset = "kernelbench:PATH" (or "local:DIR", '
                             '"ops6k:FILE") in [environments.NAME]')
        self.tasks = tasks if tasks is not None else {
            t.name: t for t in _load_tasks(dataset, _freeze(level), _freeze(ids))}
        self.plugins = plugins or Plugins()
        self.pool = pool
        self.backend = _resolve_backend(backend, self.plugins)
        self.options = EvalOptions(backend=self.backend, num_timed=int(num_timed), warmup=int(warmup),
                                   tolerance=tolerance, reward=reward)
        self.task: Task | None = None
        self.done = True
        self.last_result: EvalResult | None = None

    def sample_tasks(self, n: int, rng: Any) -> list[str]:
        names = sorted(self.tasks)
        return [rng.choice(names) for _ in range(n)]

    def _task(self, task: Any) -> Task:
        if isinstance(task, Task):
            return task
        if task not in self.tasks:
            raise ValueError(f"unknown task {task!r}; this environment's tasks: {', '.join(sorted(self.tasks)[:10])}")
        return self.tasks[task]

    def close(self) -> None:
        """Nothing to release here; the agentic environment overrides this."""

    def _failure(self, reason: str, invalid: bool = True) -> StepResult:
        """The reward plugin's value for a failed result (-1 for milestone), with the reason."""
        assert self.task is not None
        info: dict[str, Any] = {"reason": reason, "right": False, "correct": False}  # a fail in the pass rates
        if invalid:
            info["invalid_action"] = True
        return self._ended(failed_result(self.task, self.options, self.plugins, reason), info)

    def _scored(self, solution: Any, info: dict[str, Any]) -> StepResult:
        """The trusted evaluator's verdict on ``solution`` (here, or on an executor's worker), and its reward."""
        from kag.plugin import evaluate_with

        assert self.task is not None
        result = evaluate_with(None, self.task, solution, self.options, self.plugins, self.pool)
        return self._ended(result, {**info, **_result_info(result)})

    def _ended(self, result: EvalResult, info: dict[str, Any]) -> StepResult:
        """The episode's last step: ``result``'s reward (-1 when it has none)."""
        self.last_result, self.done = result, True
        value = result.reward.value if result.reward else -1.0
        return StepResult(None, float(value), True, info)


class KernelSingleTurnEnv(KernelEnvBase):
    """One message, one solution: fenced files parsed strictly, then the trusted evaluator."""

    def reset(self, task: Any) -> list[Message]:
        self.task, self.done, self.last_result = self._task(task), False, None
        return [Message("system", SINGLE_SYSTEM + "\n" + skill_summary(self.backend)),
                Message("user", task_prompt(self.task, self.backend) + answer_format(self.backend))]

    def step(self, action: str) -> StepResult:
        if self.task is None or self.done:
            raise RuntimeError("kernel-single: step() before reset() or after the episode ended")
        try:
            solution = parse_solution_blocks(action)
        except AnswerFormatError as exc:
            return self._failure(f"unparseable answer: {exc}")
        return self._scored(solution, {"files": 1 + len(solution.kernels)})


def _close_all(episodes: list[Episode]) -> None:
    while episodes:
        try:
            episodes.pop().close()
        except Exception:  # a part that fails to close must not stop the next episode
            pass


class KernelAgenticEnv(KernelEnvBase):
    """The agent loop as an environment: tool calls in, observations out, reward at the end.

    ``max_turns`` (default 150, the paper's training budget) should not exceed the trainer's own
    turn limit: an episode the trainer cuts short never reaches its final scoring unless the
    trainer calls ``truncate()``.
    """

    def __init__(self, max_turns: int = 150, sandbox: str | None = None, sandbox_options: dict | None = None,
                 tools: list[str] | None = None, tool_options: dict | None = None, **options: Any):
        from kag.plugin import build_tools

        super().__init__(**options)
        if int(max_turns) < 1:
            raise ValueError(f"kernel-agentic: max_turns must be >= 1, got {max_turns}")
        self.max_turns = int(max_turns)
        self.sandbox = self.plugins.create("sandbox", sandbox, **dict(sandbox_options or {})) if sandbox \
            else self.plugins.create("sandbox", **dict(sandbox_options or {}))
        self.tools = build_tools(self.plugins, tools, tool_options)
        self.turns = 0
        self._live: list[Episode] = []
        weakref.finalize(self, _close_all, self._live)

    @property
    def episode(self) -> Episode | None:
        return self._live[-1] if self._live else None

    def system_prompt(self, skill: str) -> str:
        from kag.plugin import tool_schemas

        schemas = "\n".join(json.dumps(s["function"], separators=(",", ":")) for s in tool_schemas(self.tools))
        return f"{SYSTEM_PROMPT}\n{TOOL_FORMAT}{schemas}\n\n{skill}"

    def reset(self, task: Any) -> list[Message]:
        from kag.plugin import skill_text

        self.close()
        self.task, self.done, self.last_result, self.turns = self._task(task), False, None, 0
        skill = skill_text()
        self._live.append(Episode(self.task, self.sandbox, self.tools, self.options, self.plugins, pool=self.pool,
                                  prefix="kag-env-"))
        return [Message("system", self.system_prompt(skill)), Message("user", task_prompt(self.task, self.backend))]

    def malformed(self, call: Any) -> str | None:
        """Why a parsed tool call is invalid (unparseable, unknown tool, bad arguments), or None."""
        from kag.plugin import PARSE_ERROR_KEY, RAW_ARGS_KEY

        if RAW_ARGS_KEY in call.arguments:
            return f"unparseable tool call: {call.arguments.get(PARSE_ERROR_KEY)}"
        tool = self.tools.get(call.name)
        if tool is None:
            return f"unknown tool {call.name!r}"
        errors = tool.validate(call.arguments) if hasattr(tool, "validate") else []
        return f"{call.name}: {'; '.join(errors)}" if errors else None

    def step(self, action: str) -> StepResult:
        from kag.plugin import parse_tool_call_text

        ep = self.episode
        if self.task is None or self.done or ep is None:
            raise RuntimeError("kernel-agentic: step() before reset() or after the episode ended")
        self.turns += 1
        _, calls = parse_tool_call_text(action)
        if not calls:
            return self.finish("model_stopped")
        observations, problems, errors = [], [], 0
        for call in calls:
            problem = self.malformed(call)
            if problem:
                problems.append(problem)
            seen = ep.call(call)
            errors += seen.is_error
            observations.append(seen.message)
        info: dict[str, Any] = {"tool_calls": len(calls), "tool_errors": errors, "evaluations": len(ep.drain())}
        if problems:
            info.update(invalid_action=True, reason="; ".join(problems))
        if self.turns >= self.max_turns:
            final = self.finish("turn_budget")
            final.observation, final.info = observations, {**info, **final.info}
            return final
        return StepResult(observations, 0.0, False, info)

    def truncate(self) -> StepResult:
        """End the episode now (a trainer's own budget ran out): final scoring as usual."""
        if self.done or self.episode is None:
            raise RuntimeError("kernel-agentic: truncate() with no episode running")
        return self.finish("truncated")

    def finish(self, stop_reason: str) -> StepResult:
        """Best timed-correct solution seen (else the workspace), re-scored after the sandbox closes
        (by the sandbox's own evaluator when it has one, as docker does)."""
        ep = self.episode
        assert ep is not None and self.task is not None
        try:
            solution, result = ep.finish()
        finally:
            self.close()
        if solution is None:  # nothing readable in the workspace: the failure reward
            return self._ended(result, {"reason": result.error, "right": False, "correct": False,
                                        "stop_reason": stop_reason})
        return self._ended(result, {"stop_reason": stop_reason, "best_from": ep.solution_from, "turns": self.turns,
                                    **_result_info(result)})

    def close(self) -> None:
        """Stop the sandbox and the bridge, remove the episode's files (safe to call twice)."""
        _close_all(self._live)


@hookimpl
def kag_register_environments(register) -> None:
    register("kernel-single", KernelSingleTurnEnv)
    register("kernel-agentic", KernelAgenticEnv)
