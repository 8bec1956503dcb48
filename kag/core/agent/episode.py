"""One agent episode's pieces, built once for both drivers: ``kag run``'s loop and the RL environment.

An ``Episode`` makes a workspace for the task, starts a sandbox on it with the evaluation bridge
mounted, and answers the bridge with an ``EpisodeEvaluator``: every compile/verify/profile the
agent's commands ask for is judged by the trusted evaluator (or, when the sandbox evaluates itself,
as docker does, by the sandbox's; then no solution code of the episode runs here). The driver
feeds it tool calls (``call``), collects the verdicts each turn asked for (``drain``), and ends it
with ``finish``: the best correct solution seen, scored again once the agent's commands have
stopped. ``kag.core.agent.loop.Agent`` and ``kag.plugins.environments.kernel_env.KernelAgenticEnv``
drive it; neither builds these pieces itself.

Trusted side: this runs outside the sandbox and reads the agent's workspace only through
``read_solution`` (no link followed, nothing outside the workspace; kag.core.trust.safefs).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

import attrs

from kag.core import scratch, timeline
from kag.core.eval.orchestrator.analysis import analyse_reference, format_analysis, is_untouched
from kag.core.agent.bridge import BridgeReply, EvalBridge
from kag.core.eval.orchestrator.evaluate import EvalOptions, backend_device
from kag.core.plugins import Plugins
from kag.core.records import EvalResult, Message, RewardValue, Solution, Task, ToolCall
from kag.core.eval.orchestrator.feedback import format_build, format_eval
from kag.core.agent.sandbox import SandboxEvaluator, build_with, evaluate_with
from kag.core.agent.toolkit import ToolContext, call_tool, observation_message
from kag.core.agent.workspace import WorkspaceError, make_workspace, read_solution

SYSTEM_PROMPT = """\
You are an expert CUDA performance engineer. You work in a workspace that holds a PyTorch reference
model (model.py) and must write a faster implementation (model_new.py plus CUDA kernels in kernels/)
that produces the same outputs. Act only through the tools. Follow the workflow and rules of
SKILL.md below exactly: compile with `bash utils/compile.sh`, check with `python3 utils/verification.py`,
time with `python3 utils/profiling.py`. When your solution is correct and as fast as you can make it,
answer without a tool call to finish.
"""


def task_prompt(task: Task, backend: str) -> str:
    target = {"cuda": "CUDA kernels (kernels/*.cu + *_binding.cpp)",
              "nvrtc": "CUDA kernels compiled by NVRTC (kernels/*.cu with extern \"C\" __global__ kernels only, "
                       "launched from model_new.py as cuda_extension.<kernel>(grid, block, *args))"}.get(
        backend, "C++ CPU kernels (kernels/*.cpp + *_binding.cpp; this run uses the CPU backend)")
    return (f"Task {task.name}. Make ModelNew in model_new.py faster than torch.compile on this reference "
            f"using {target}. The reference model.py:\n\n```python\n{task.code}\n```\n")


def failed_result(task: Task, options: EvalOptions, plugins: Plugins, reason: str) -> EvalResult:
    """The verdict when there is nothing to evaluate, with the reward plugin's value for it."""
    result = EvalResult(task=task.name, backend=options.backend, error=reason, error_kind="exception")
    reward = plugins.create("reward", options.reward) if options.reward else plugins.create("reward")
    result.reward = RewardValue(name=getattr(reward, "name", options.reward or "reward"), value=float(reward(result)))
    return result


class EpisodeEvaluator:
    """Answers the skill scripts' requests for one episode and keeps every verdict it gave.

    Trusted side: it reads the solution from the agent-writable workspace without following links
    (``read_solution``) and builds ``compile`` requests into a temp folder of its own, never into
    the workspace; ``close()`` removes that folder.
    """

    def __init__(self, task: Task, workspace: Path, options: EvalOptions, plugins: Plugins, pool: Any = None,
                 sandbox: Any = None):
        """``sandbox``: the episode's handle; when it evaluates itself (``SandboxEvaluator``, e.g.
        docker), every build and evaluation goes there, so no solution code runs here."""
        self.task, self.workspace, self.options, self.plugins, self.pool = task, workspace, options, plugins, pool
        self.build_dir = Path(scratch.mkdtemp("kag-compile-"))
        self._build_lock = threading.Lock()  # close() waits for a compile still writing build_dir
        self._closed = False
        self.sandbox = sandbox
        self.records: list[tuple[Solution, EvalResult]] = []
        self._pending: list[EvalResult] = []
        self._lock = threading.Lock()
        self.lane = timeline.lane()  # the bridge's thread answers in the episode's lane of the timeline
        from kag.core.eval.serve.remote import ExecutorEvaluations

        remote = isinstance(sandbox, SandboxEvaluator) or isinstance(pool, ExecutorEvaluations)
        if options.backend != "cpu" and not remote:
            from kag.core.eval.orchestrator.judge_process import JUDGES_PER_EPISODE, keep_judges_warm

            keep_judges_warm(JUDGES_PER_EPISODE)  # an episode evaluates again and again: keep judges started

    def score(self, solution: Solution, options: EvalOptions | None = None) -> EvalResult:
        """The trusted verdict, from the sandbox's evaluator when it has one (the final re-score too)."""
        return evaluate_with(self.sandbox, self.task, solution, options or self.options, self.plugins, self.pool)

    def __call__(self, action: str, args: list[str]) -> BridgeReply:
        with timeline.in_lane(self.lane), timeline.span(f"request: {action}", task=self.task.name):
            return self._answer(action, args)

    def _answer(self, action: str, args: list[str]) -> BridgeReply:
        try:
            solution = read_solution(self.workspace)
        except WorkspaceError as exc:
            return BridgeReply(f"{action} refused: {exc}", 2)
        if action == "compile":
            backend = self.plugins.create("backend", self.options.backend)
            with self._build_lock:
                if self._closed:
                    return BridgeReply("compile refused: the episode has ended", 2)
                built = build_with(self.sandbox, solution, self.options, self.plugins, self.build_dir)
            return BridgeReply(format_build(built, backend.name), 0 if built.ok else 1)
        if action == "profile" and is_untouched(self.task, solution):  # the paper's analysis step: reference only
            device = backend_device(self.options.backend, self.plugins)
            return BridgeReply(format_analysis(analyse_reference(self.task, device, self.options.compile_mode)), 0)
        opts = attrs.evolve(self.options, do_timing=False) if action == "verify" else self.options
        result = self.score(solution, opts)
        with self._lock:
            self.records.append((solution, result))
            self._pending.append(result)
        return BridgeReply(format_eval(result), 0 if result.ok else 1)

    def close(self) -> None:
        """Remove the compile folder, after a compile in flight (safe to call twice)."""
        with self._build_lock:
            self._closed = True
            shutil.rmtree(self.build_dir, ignore_errors=True)

    def drain(self) -> list[EvalResult]:
        """Verdicts given since the last call (recorded on the turn that asked for them)."""
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def best(self) -> Solution | None:
        """The correct, timed solution with the highest speed-up over torch.compile (or eager)."""
        timed = [(s, r) for s, r in self.records if r.ok and r.times_ms.get("candidate")]
        if not timed:
            return None
        key: Callable[[EvalResult], float] = lambda r: r.speedup_vs_compile or r.speedup_vs_eager or 0.0
        return max(timed, key=lambda sr: key(sr[1]))[0]


@attrs.frozen
class Observation:
    """What one tool call gave: the ``tool`` message that answers it, whether it failed and whether
    it ran out of time (a command killed at its timeout)."""

    message: Message
    is_error: bool = False
    timed_out: bool = False


class Episode:
    """One episode's workspace, sandbox, evaluation bridge, evaluator and tool context.

    A context manager: leaving it (or ``close()``) stops the sandbox and the bridge and removes the
    episode's files, whether or not ``finish`` ran. ``prefix`` names the episode's temp folder.
    """

    def __init__(self, task: Task, sandbox: Any, tools: Mapping[str, Any], options: EvalOptions, plugins: Plugins,
                 pool: Any = None, prefix: str = "kag-episode-"):
        self.task, self.tools, self.options, self.plugins = task, tools, options, plugins
        self.tmp = Path(scratch.mkdtemp(prefix))
        self.bridge: EvalBridge | None = None
        self.handle: Any = None
        self.evaluator: EpisodeEvaluator | None = None
        self.ctx: ToolContext | None = None
        self.solution_from = ""  # after finish: "profiled" (best verdict), "workspace", or "" (none)
        try:
            template = make_workspace(task, self.tmp / "template", backend=options.backend)
            self.bridge = EvalBridge(directory=self.tmp / "bridge")  # the sandbox mounts it, then the evaluator answers
            self.handle = sandbox.start(template, bridge_dir=self.bridge.directory)
            self.evaluator = EpisodeEvaluator(task, self.handle.path(), options, plugins, pool, sandbox=self.handle)
            self.bridge.set_handler(self.evaluator)
            self.ctx = ToolContext.from_sandbox(self.handle)
        except BaseException:
            with contextlib.suppress(Exception):  # the failure to start is the one to report
                self.close()
            raise

    def __enter__(self) -> "Episode":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, call: ToolCall) -> Observation:
        """Run one tool call in the sandbox; unknown tools and bad arguments are error observations."""
        assert self.ctx is not None, "the episode has ended"
        out = call_tool(self.tools, self.ctx, call)
        return Observation(observation_message(call, out), bool(out.is_error),
                           bool(out.is_error and out.metadata.get("timed_out")))

    def drain(self) -> list[EvalResult]:
        """The verdicts the bridge gave since the last drain: call it after each turn's tool calls so
        they are recorded on the turn that asked for them. ``finish`` needs no drain first: it
        picks from every verdict, drained or not."""
        assert self.evaluator is not None, "the episode has ended"
        return self.evaluator.drain()

    def finish(self) -> tuple[Solution | None, EvalResult]:
        """The best timed-correct solution seen (else the workspace's), re-scored after the sandbox
        and the bridge are closed, so none of the agent's commands runs during the final verdict.

        The solution is None when the workspace holds none that can be read (e.g. a link in
        kernels/); the result is then the failure verdict. The episode is closed afterwards.
        """
        assert self.evaluator is not None and self.handle is not None, "the episode has ended"
        try:
            evaluator = self.evaluator
            solution, unscorable = evaluator.best(), ""
            self.solution_from = "profiled" if solution is not None else "workspace"
            if solution is None:
                try:
                    solution = read_solution(self.handle.path())
                except WorkspaceError as exc:  # e.g. the agent left a link in kernels/
                    unscorable, self.solution_from = f"no solution to score: {exc}", ""
            self._close_parts()
            result = evaluator.score(solution) if solution is not None else \
                failed_result(self.task, self.options, self.plugins, unscorable)
            return solution, result
        finally:
            self.close()

    def _close_parts(self) -> None:
        """Stop the evaluator, the tools' state, the sandbox and the bridge, in that order; every
        part is closed even when one fails, and the first failure is raised after."""
        first: BaseException | None = None
        for part in (self.evaluator, self.ctx, self.handle, self.bridge):
            if part is not None:
                try:
                    part.close()
                except BaseException as exc:
                    first = first or exc
        self.evaluator = self.ctx = self.handle = self.bridge = None
        if first is not None:
            raise first

    def close(self) -> None:
        """Close every part and remove the episode's files (safe to call twice)."""
        try:
            self._close_parts()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
