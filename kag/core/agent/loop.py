"""The ReAct loop: the policy chooses tool calls, the sandbox runs them, the evaluator judges.

One episode (``kag.core.agent.episode.Episode``: the workspace, the sandbox with the evaluation bridge
mounted, the evaluator and the tools; the RL environment drives the same one): alternate policy
steps and tool observations until the model stops or a budget (turns, context tokens) runs out.
Every compile/verify/profile the agent asks for goes through the bridge to the trusted evaluator
and is recorded on its turn; a sandbox that evaluates itself (docker: in containers) is that
evaluator, so no solution code of its episodes runs here. The episode's result is the best correct
solution seen (highest speed-up over torch.compile), scored again at the end by the same evaluator;
the reward plugin's value on it is the episode reward.

Trusted side: this runs outside the sandbox; it sees the agent's workspace only through the
episode (``read_solution``: no link followed, nothing outside the workspace; kag.core.trust.safefs).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import attrs

from kag import __version__
from kag.core import timeline
from kag.core.agent.episode import SYSTEM_PROMPT, Episode, task_prompt
from kag.core.eval.orchestrator.evaluate import EvalOptions
from kag.core.plugins import Plugins
from kag.core.agent.policy import PolicyError, PolicyStep
from kag.core.records import Message, Solution, Task, Trajectory, Turn
from kag.core.agent.toolkit import build_tools, tool_schemas
from kag.core.agent.trajectory import TrajectoryWriter
from kag.core.agent.workspace import skill_text


@attrs.define
class AgentConfig:
    max_turns: int = 200
    max_context_tokens: int = 128_000
    eval_options: EvalOptions = attrs.field(factory=EvalOptions)
    system_prompt: str = SYSTEM_PROMPT


def _approx_tokens(messages: list[Message]) -> int:
    return sum(len(m.content) + sum(len(str(c.arguments)) for c in m.tool_calls) for m in messages) // 4


class Agent:
    """Runs episodes with one policy, one sandbox kind and one evaluator configuration."""

    def __init__(self, plugins: Plugins, policy: Any, sandbox: Any, config: AgentConfig | None = None,
                 writer: TrajectoryWriter | None = None, pool: Any = None, policy_name: str = "",
                 on_turn: Callable[[Turn], None] | None = None):
        self.plugins, self.policy, self.sandbox = plugins, policy, sandbox
        self.on_turn = on_turn  # told of each turn as it ends (a progress display)
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
        try:
            with timeline.in_lane(episode_id), Episode(task, self.sandbox, self.tools, options, self.plugins,
                                                       self.pool) as episode:
                traj.stop_reason = self._loop(task, traj, episode)
                final_solution, traj.result = episode.finish()  # after the agent's commands are stopped
            traj.reward = traj.result.reward.value if traj.result.reward else None
            return traj, final_solution
        finally:
            traj.elapsed_s = round(time.perf_counter() - start, 3)
            if self.writer is not None:
                self.writer.finish(traj)

    def _loop(self, task: Task, traj: Trajectory, episode: Episode) -> str:
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
                with timeline.span("policy"):
                    step: PolicyStep = self.policy.act(list(traj.messages), schemas)
            except PolicyError as exc:
                return f"policy_error: {exc}"
            traj.messages.append(step.message)
            turn = Turn(index=index, response=step.message, prompt_token_ids=list(step.prompt_token_ids),
                        response_token_ids=list(step.response_token_ids),
                        response_logprobs=list(step.response_logprobs), usage=dict(step.usage))
            for call in step.message.tool_calls:
                with timeline.span(f"tool: {call.name}"):
                    seen = episode.call(call)
                turn.tool_errors += seen.is_error
                turn.tool_timeouts += seen.timed_out
                turn.observations.append(seen.message)
                traj.messages.append(seen.message)
            turn.eval_results = episode.drain()
            turn.elapsed_s = round(time.perf_counter() - t0, 3)
            traj.turns.append(turn)
            if self.writer is not None:
                self.writer.append_turn(traj.episode_id, turn)
            if self.on_turn is not None:
                self.on_turn(turn)
            if step.done:
                return "model_stopped"
            used = step.usage.get("prompt_tokens", 0) + step.usage.get("completion_tokens", 0)
            if max(used, _approx_tokens(traj.messages)) >= self.config.max_context_tokens:
                return "context_budget"
        return "turn_budget"
