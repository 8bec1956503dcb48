"""The ReAct loop: the policy chooses tool calls, the sandbox runs them, the evaluator judges.

One episode: make a workspace for the task, start a sandbox on it with the evaluation bridge
mounted, then alternate policy steps and tool observations until the model stops or a budget
(turns, context tokens) runs out. Every compile/verify/profile the agent asks for goes through
the bridge to the trusted evaluator and is recorded on its turn; a sandbox that evaluates itself
(docker: in containers) is that evaluator, so no solution code of its episodes runs here. The
episode's result is the best correct solution seen (highest speed-up over torch.compile), scored
again at the end by the same evaluator; the reward plugin's value on it is the episode reward.

Trusted side: this runs outside the sandbox and reads the agent's workspace only through
``read_solution`` (no link followed, nothing outside the workspace; kag.core.safefs).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import attrs

from kag import __version__
from kag.core.analysis import analyse_reference, format_analysis, is_untouched
from kag.core.bridge import BridgeReply, EvalBridge
from kag.core.evaluate import EvalOptions
from kag.core.plugins import Plugins
from kag.core.policy import PolicyError, PolicyStep
from kag.core.records import EvalResult, Message, RewardValue, Solution, Task, Trajectory, Turn
from kag.core.report import format_build, format_eval
from kag.core.sandbox import SandboxEvaluator, build_with, evaluate_with
from kag.core.toolkit import ToolContext, build_tools, call_tool, observation_message, tool_schemas
from kag.core.trajectory import TrajectoryWriter
from kag.core.workspace import WorkspaceError, make_workspace, read_solution, skill_text

SYSTEM_PROMPT = """\
You are an expert CUDA performance engineer. You work in a workspace that holds a PyTorch reference
model (model.py) and must write a faster implementation (model_new.py plus CUDA kernels in kernels/)
that produces the same outputs. Act only through the tools. Follow the workflow and rules of
SKILL.md below exactly: compile with `bash utils/compile.sh`, check with `python3 utils/verification.py`,
time with `python3 utils/profiling.py`. When your solution is correct and as fast as you can make it,
answer without a tool call to finish.
"""


@attrs.define
class AgentConfig:
    max_turns: int = 200
    max_context_tokens: int = 128_000
    eval_options: EvalOptions = attrs.field(factory=EvalOptions)
    system_prompt: str = SYSTEM_PROMPT


def task_prompt(task: Task, backend: str) -> str:
    target = "CUDA kernels (kernels/*.cu + *_binding.cpp)" if backend == "cuda" else \
        "C++ CPU kernels (kernels/*.cpp + *_binding.cpp; this run uses the CPU backend)"
    return (f"Task {task.name}. Make ModelNew in model_new.py faster than torch.compile on this reference "
            f"using {target}. The reference model.py:\n\n```python\n{task.code}\n```\n")


def failed_result(task: Task, options: EvalOptions, plugins: Plugins, reason: str) -> EvalResult:
    """The verdict when there is nothing to evaluate, with the reward plugin's value for it."""
    result = EvalResult(task=task.name, backend=options.backend, error=reason, error_kind="exception")
    reward = plugins.create("reward", options.reward) if options.reward else plugins.create("reward")
    result.reward = RewardValue(name=getattr(reward, "name", options.reward or "reward"), value=float(reward(result)))
    return result


def _approx_tokens(messages: list[Message]) -> int:
    return sum(len(m.content) + sum(len(str(c.arguments)) for c in m.tool_calls) for m in messages) // 4


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
        self.build_dir = Path(tempfile.mkdtemp(prefix="kag-compile-"))
        self._build_lock = threading.Lock()  # close() waits for a compile still writing build_dir
        self._closed = False
        self.sandbox = sandbox
        self.records: list[tuple[Solution, EvalResult]] = []
        self._pending: list[EvalResult] = []
        self._lock = threading.Lock()
        if options.backend != "cpu" and not isinstance(sandbox, SandboxEvaluator):
            from kag.core.judge_process import keep_judges_warm

            keep_judges_warm(1)  # an episode evaluates again and again: keep a judge started

    def score(self, solution: Solution, options: EvalOptions | None = None) -> EvalResult:
        """The trusted verdict, from the sandbox's evaluator when it has one (the final re-score too)."""
        return evaluate_with(self.sandbox, self.task, solution, options or self.options, self.plugins, self.pool)

    def __call__(self, action: str, args: list[str]) -> BridgeReply:
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
            device = "cuda" if self.options.backend == "cuda" else "cpu"
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


class Agent:
    """Runs episodes with one policy, one sandbox kind and one evaluator configuration."""

    def __init__(self, plugins: Plugins, policy: Any, sandbox: Any, config: AgentConfig | None = None,
                 writer: TrajectoryWriter | None = None, pool: Any = None, policy_name: str = ""):
        self.plugins, self.policy, self.sandbox = plugins, policy, sandbox
        self.config = config or AgentConfig()
        self.writer, self.pool = writer, pool
        self.policy_name = policy_name or getattr(policy, "name", type(policy).__name__)
        self.tools = build_tools(plugins)

    def run_episode(self, task: Task, episode_id: str | None = None) -> tuple[Trajectory, Solution | None]:
        """Play one episode; returns its trajectory and the solution its result is for."""
        episode_id = episode_id or f"{task.name.replace('/', '__')}-{uuid.uuid4().hex[:8]}"
        options = self.config.eval_options
        traj = Trajectory(episode_id=episode_id, task=task.name, policy=self.policy_name,
                          plugins=self.plugins.names_selected(), kag_version=__version__)
        start = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix="kag-episode-"))
        try:
            template = make_workspace(task, tmp / "template", backend=options.backend)
            handle = None
            evaluator = None
            with EvalBridge(lambda a, r: evaluator(a, r), tmp / "bridge") as bridge:  # type: ignore[misc]
                handle = self.sandbox.start(template, bridge_dir=bridge.directory)
                evaluator = EpisodeEvaluator(task, handle.path(), options, self.plugins, self.pool, sandbox=handle)
                ctx = ToolContext.from_sandbox(handle)
                try:
                    traj.stop_reason = self._loop(task, traj, ctx, evaluator)
                    final_solution, unscorable = evaluator.best(), ""
                    if final_solution is None:
                        try:
                            final_solution = read_solution(handle.path())
                        except WorkspaceError as exc:  # e.g. the agent left a link in kernels/
                            unscorable = f"no solution to score: {exc}"
                finally:
                    evaluator.close()
                    ctx.close()
                    handle.close()
            traj.result = (evaluator.score(final_solution)  # after the agent's commands are stopped
                           if final_solution is not None else failed_result(task, options, self.plugins, unscorable))
            traj.reward = traj.result.reward.value if traj.result.reward else None
            return traj, final_solution
        finally:
            traj.elapsed_s = round(time.perf_counter() - start, 3)
            if self.writer is not None:
                self.writer.finish(traj)
            shutil.rmtree(tmp, ignore_errors=True)

    def _loop(self, task: Task, traj: Trajectory, ctx: ToolContext, evaluator: EpisodeEvaluator) -> str:
        skill = skill_text()
        traj.messages = [Message("system", f"{self.config.system_prompt}\n\n{skill}"),
                         Message("user", task_prompt(task, self.config.eval_options.backend))]
        try:
            if hasattr(self.policy, "reset"):
                self.policy.reset(task=task.name)
        except PolicyError as exc:
            return f"policy_error: {exc}"
        schemas = tool_schemas(self.tools)
        for index in range(self.config.max_turns):
            t0 = time.perf_counter()
            try:
                step: PolicyStep = self.policy.act(list(traj.messages), schemas)
            except PolicyError as exc:
                return f"policy_error: {exc}"
            traj.messages.append(step.message)
            turn = Turn(index=index, response=step.message, prompt_token_ids=list(step.prompt_token_ids),
                        response_token_ids=list(step.response_token_ids),
                        response_logprobs=list(step.response_logprobs), usage=dict(step.usage))
            for call in step.message.tool_calls:
                out = call_tool(self.tools, ctx, call)
                obs = observation_message(call, out)
                turn.observations.append(obs)
                traj.messages.append(obs)
            turn.eval_results = evaluator.drain()
            turn.elapsed_s = round(time.perf_counter() - t0, 3)
            traj.turns.append(turn)
            if self.writer is not None:
                self.writer.append_turn(traj.episode_id, turn)
            if step.done:
                return "model_stopped"
            used = step.usage.get("prompt_tokens", 0) + step.usage.get("completion_tokens", 0)
            if max(used, _approx_tokens(traj.messages)) >= self.config.max_context_tokens:
                return "context_budget"
        return "turn_budget"
