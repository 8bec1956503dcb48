"""Rejection fine-tuning filters: which collected trajectories the actor may imitate.

A trajectory is kept when its reward is above a threshold and it shows none of the bad patterns
that RFT would otherwise teach: invalid tool calls (a turn with an error), the same action
repeated many times in a row, or a loop (a block of actions repeating, e.g. A B A B A B).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import attrs

from kag.plugin import Trajectory


@attrs.frozen
class RftFilter:
    min_reward: float = 0.0  # keep reward > min_reward
    max_identical_repeats: int = 3  # reject when one action occurs this many times in a row
    max_loop_period: int = 4  # look for repeating blocks of 2..this many actions
    min_loop_repeats: int = 3  # reject when such a block occurs this many times in a row
    reject_invalid: bool = True


def actions(traj: Trajectory) -> list[str]:
    """The model's actions: text plus tool calls, normalised so whitespace does not hide a repeat."""
    out = []
    for turn in traj.turns:
        calls = ";".join(f"{c.name}({sorted(c.arguments.items())})" for c in turn.response.tool_calls)
        out.append(" ".join(turn.response.content.split()) + "|" + calls)
    return out


def longest_identical_run(items: Sequence[str]) -> int:
    best = run = 0
    for i, item in enumerate(items):
        run = run + 1 if i and item == items[i - 1] else 1
        best = max(best, run)
    return best


def find_loop(items: Sequence[str], max_period: int, min_repeats: int) -> tuple[int, int] | None:
    """(start, period) of the first block of 2..max_period items repeated min_repeats times in a row."""
    n = len(items)
    for period in range(2, max_period + 1):
        span = period * min_repeats
        for start in range(0, n - span + 1):
            block = list(items[start:start + period])
            if len(set(block)) > 1 and all(list(items[start + k * period:start + (k + 1) * period]) == block
                                           for k in range(1, min_repeats)):
                return start, period
    return None


def rejection_reason(traj: Trajectory, rules: RftFilter = RftFilter()) -> str | None:
    """None when the trajectory is kept, else why it is dropped."""
    if traj.reward is None or traj.reward <= rules.min_reward:
        return f"reward {traj.reward} <= {rules.min_reward}"
    if rules.reject_invalid:
        bad = [t.index for t in traj.turns if t.error]
        if bad:
            return f"invalid action in turn {bad[0]}: {traj.turns[bad[0]].error}"
    acts = actions(traj)
    run = longest_identical_run(acts)
    if run >= rules.max_identical_repeats:
        return f"the same action {run} times in a row"
    loop = find_loop(acts, rules.max_loop_period, rules.min_loop_repeats)
    if loop is not None:
        return f"a loop of {loop[1]} actions repeated from turn {loop[0]}"
    return None


def filter_trajectories(trajs: Iterable[Trajectory], rules: RftFilter = RftFilter()) -> tuple[list[Trajectory], dict[str, int]]:
    """The kept trajectories and a count of drops by reason kind."""
    kept: list[Trajectory] = []
    drops: dict[str, int] = {}
    for traj in trajs:
        reason = rejection_reason(traj, rules)
        if reason is None:
            kept.append(traj)
        else:
            key = reason.split(" ")[0] if not reason.startswith("the same") else "repeat"
            key = {"a": "loop", "invalid": "invalid", "reward": "reward"}.get(key, key)
            drops[key] = drops.get(key, 0) + 1
    return kept, drops
