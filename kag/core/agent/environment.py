"""The environment protocol RL stages train against.

An environment turns a task into a prompt and scores the model's actions, one turn at a time.
The trainer owns tokens and the model; the environment sees only text. The CUDA environment
(agent loop + trusted evaluator) and cheap toy environments go through the same path, so a
learning check on a toy task exercises the code that trains the real agent.

Environment plugins register under the kind ``environment``::

    @hookimpl
    def kag_register_environments(register):
        register("copy-digit", CopyDigitEnv)

A factory is called once per concurrent episode slot; ``reset`` starts a new episode on it. The
``Environment`` Protocol lives in kag.core.contracts.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import attrs

from kag.core.contracts import Environment  # noqa: F401 - the contract, re-exported
from kag.core.records import Message, Trajectory, Turn


@attrs.define
class StepResult:
    """What one action did. Unpacks as ``observation, reward, done``; ``info`` carries flags such
    as ``invalid_action`` (an unparsable or invalid tool call) that trajectory filters read."""

    observation: list[Message] | None
    reward: float
    done: bool
    info: dict[str, Any] = attrs.field(factory=dict)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.observation, self.reward, self.done))


def as_step_result(value: StepResult | tuple[Any, ...], env_name: str = "environment") -> StepResult:
    """Accept a third-party env's plain 3-tuple as well as a StepResult."""
    if isinstance(value, StepResult):
        return value
    if isinstance(value, tuple) and len(value) in (3, 4):
        obs, reward, done = value[:3]
        info = dict(value[3]) if len(value) == 4 else {}
        if isinstance(obs, str):
            obs = [Message(role="user", content=obs)]
        return StepResult(obs, float(reward), bool(done), info)
    raise TypeError(
        f"{env_name}.step() returned {type(value).__name__}; it must return StepResult or "
        f"(observation, reward, done)"
    )


def truncation(env: Any) -> StepResult | None:
    """The trainer's budget ended the episode: let the environment score it (``truncate()``, optional:
    the kernel environments re-score the best solution seen); its reward is added to the last step's."""
    finish = getattr(env, "truncate", None)
    if finish is None:
        return None
    try:
        return finish()
    except RuntimeError:  # the environment had already ended the episode
        return None


def plain_info(info: dict[str, Any]) -> dict[str, Any]:
    """The JSON-safe part of a step's info (it is stored with the trajectory)."""
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) or v is None}


def step_error(info: dict[str, Any]) -> str | None:
    """A step's error as a turn records it: an invalid action (a trajectory filter reads it), or the info's error."""
    if info.get("invalid_action"):
        return f"invalid action: {info.get('reason', 'rejected by the environment')}"
    return info.get("error")


def play_episode(env: Any, policy: Any, task: Any, *, max_turns: int, tools: list[dict[str, Any]] | None = None,
                 env_name: str = "environment") -> Trajectory:
    """One episode at the level of text, as kag's stages play one: ``env.reset(task)`` (and the
    policy's ``reset(task=...)`` where it has one), then the policy acts and the environment steps
    until it says done or ``max_turns`` ends it, when ``truncate()`` scores it. For an algorithm that
    needs no tokens (evaluation, best-of-n, search); PPO plays the same turns with its own sampler.
    The trajectory holds each turn, the messages, ``reward`` (the steps' sum), ``stop_reason``
    ("done" or "max_turns") and ``metadata["step_rewards"]``/``["step_info"]``."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    messages = list(env.reset(task))
    if hasattr(policy, "reset"):
        policy.reset(task=str(task))
    traj = Trajectory(episode_id=uuid.uuid4().hex[:12], task=str(task), messages=list(messages),
                      metadata={"step_rewards": [], "step_info": []})
    for index in range(max_turns):
        response = policy.act(list(traj.messages), list(tools or [])).message
        result = as_step_result(env.step(response.content), env_name)
        observations = list(result.observation or [])
        traj.turns.append(Turn(index=index, response=response, observations=observations,
                               error=step_error(result.info)))
        traj.messages.extend([response, *observations])
        traj.metadata["step_rewards"].append(float(result.reward))
        traj.metadata["step_info"].append(plain_info(result.info))
        if result.done:
            traj.stop_reason = "done"
            break
    else:
        traj.stop_reason = "max_turns"
        late = truncation(env)
        if late is not None:
            traj.metadata["step_rewards"][-1] += float(getattr(late, "reward", 0.0) or 0.0)
    traj.reward = float(sum(traj.metadata["step_rewards"]))
    return traj
