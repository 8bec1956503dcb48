"""Toy environments with a cheap verifiable reward, for learning checks of the RL stages.

``copy-digit``: the user says ``copy 7``; the answer is right when it is ``7`` (``match="exact"``)
or starts with ``7`` (``match="first"``, the default, learnable by a random tiny model in
minutes). With ``turns > 1`` the next digits arrive as tool messages (``next 3``), so the
multi-turn path (masked observation tokens, per-turn rewards) runs on the same task.
"""

from __future__ import annotations

import random
import string

from kag.plugin import Message, StepResult, hookimpl


class CopyDigitEnv:
    """Reward (right ? 1 : wrong_reward) / turns per turn; a non-digit answer is an invalid action.

    ``digit_reward`` (default 0) is the reward for a wrong but valid digit: shaping that makes a
    random tiny model's first successes come sooner in learning checks. ``info["right"]`` says
    whether the copy was right, whatever the shaping.
    """

    def __init__(self, turns: int = 1, digits: str = string.digits, match: str = "first", wrong_reward: float = 0.0,
                 digit_reward: float = 0.0):
        if int(turns) < 1:
            raise ValueError(f"copy-digit: turns must be >= 1, got {turns}")
        if match not in ("first", "exact"):
            raise ValueError(f"copy-digit: match must be 'first' or 'exact', got {match!r}")
        if not digits or any(d not in string.digits for d in digits):
            raise ValueError(f"copy-digit: digits must be a non-empty string of 0-9, got {digits!r}")
        self.turns, self.digits, self.match, self.wrong_reward = int(turns), digits, match, float(wrong_reward)
        self.digit_reward = float(digit_reward)
        self.target = ""
        self.index = 0

    def sample_tasks(self, n: int, rng: random.Random) -> list[str]:
        return ["".join(rng.choice(self.digits) for _ in range(self.turns)) for _ in range(n)]

    def reset(self, task: str) -> list[Message]:
        if len(task) != self.turns or not task.isdigit():
            raise ValueError(f"copy-digit: a task is {self.turns} digit(s), got {task!r}")
        self.target, self.index = task, 0
        return [Message(role="user", content=f"copy {task[0]}")]

    def step(self, action: str) -> StepResult:
        if self.index >= len(self.target):
            raise RuntimeError("copy-digit: step() after the episode ended; call reset() first")
        answer = action.strip()
        want = self.target[self.index]
        right = answer == want if self.match == "exact" else answer[:1] == want
        info: dict = {"right": right}
        valid = bool(answer) and answer[0] in string.digits
        if not valid:
            info.update(invalid_action=True, reason=f"expected a digit, got {answer[:20]!r}")
        self.index += 1
        done = self.index == len(self.target)
        obs = None if done else [Message(role="tool", content=f"next {self.target[self.index]}")]
        value = 1.0 if right else (self.digit_reward if valid else self.wrong_reward)
        return StepResult(obs, value / self.turns, done, info)


@hookimpl
def kag_register_environments(register) -> None:
    register("copy-digit", CopyDigitEnv)
