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

from typing import Any, Iterator

import attrs

from kag.core.contracts import Environment  # noqa: F401 - the contract, re-exported
from kag.core.records import Message


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
