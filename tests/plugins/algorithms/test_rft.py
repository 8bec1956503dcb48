"""RFT filters: reward threshold, invalid tool calls, repeated identical actions, loops."""

from kag.core.records import Message, ToolCall, Trajectory, Turn
from kag.plugins.algorithms.ppo.rft import (
    RftFilter, actions, filter_trajectories, find_loop, longest_identical_run, rejection_reason)


def traj(acts, reward=1.0, errors=()):
    turns = [Turn(index=i, response=Message(role="assistant", content=a), error="bad call" if i in errors else None)
             for i, a in enumerate(acts)]
    return Trajectory(episode_id="e", task="t", turns=turns, reward=reward)


def test_keeps_a_clean_rewarded_trajectory():
    assert rejection_reason(traj(["ls", "write a", "compile", "verify"])) is None


def test_reward_must_be_above_threshold():
    assert "reward 0.0" in rejection_reason(traj(["a", "b"], reward=0.0))
    assert "reward -1.0" in rejection_reason(traj(["a", "b"], reward=-1.0))
    assert rejection_reason(traj(["a"], reward=None)) is not None
    assert rejection_reason(traj(["a"], reward=0.5), RftFilter(min_reward=1.0)) is not None


def test_invalid_tool_call_rejects():
    assert "invalid action in turn 1" in rejection_reason(traj(["a", "b", "c"], errors=(1,)))
    assert rejection_reason(traj(["a", "b", "c"], errors=(1,)), RftFilter(reject_invalid=False)) is None


def test_repeated_identical_actions():
    # whitespace differences do not hide a repeat
    acts = ["a", "run  tests", "run tests", " run tests\n", "b"]
    assert longest_identical_run(actions(traj(acts))) == 3
    assert rejection_reason(traj(acts)) == "the same action 3 times in a row"
    assert rejection_reason(traj(["x", "x", "y", "x", "x"])) is None  # two in a row is allowed
    # same text but different tool calls are different actions
    t = traj(["", "", ""])
    for i, turn in enumerate(t.turns):
        turn.response.tool_calls = [ToolCall(id=str(i), name="read", arguments={"path": f"f{i}"})]
    assert rejection_reason(t) is None


def test_loops():
    assert find_loop(list("xABABABy"), max_period=4, min_repeats=3) == (1, 2)
    assert find_loop(list("ABCABCABC"), max_period=4, min_repeats=3) == (0, 3)
    assert find_loop(list("ABABAC"), max_period=4, min_repeats=3) is None
    assert find_loop(list("ABCDABCDABCD"), max_period=3, min_repeats=3) is None  # period 4 > max
    assert rejection_reason(traj(list("xABABABy"))) == "a loop of 2 actions repeated from turn 1"


def test_filter_counts_reasons():
    trajs = [traj(["a", "b"]), traj(["a"], reward=0), traj(["a", "b"], errors=(0,)), traj(["z"] * 3),
             traj(list("ABABAB"))]
    kept, drops = filter_trajectories(trajs)
    assert len(kept) == 1
    assert drops == {"reward": 1, "invalid": 1, "repeat": 1, "loop": 1}
