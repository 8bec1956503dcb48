"""play_episode: one text-level episode as kag's stages play it, for algorithms that need no tokens."""

import pytest

from kag.plugin import Message, PolicyStep, StepResult, play_episode


class CountTo:
    """Says a number; the right answer is the next one. Done at ``goal``; ``truncate()`` scores 0.5."""

    def __init__(self, goal=3, plain_tuples=False):
        self.goal, self.plain_tuples, self.at, self.truncated = goal, plain_tuples, None, 0

    def reset(self, task):
        self.at = int(task)
        return [Message(role="user", content=str(self.at))]

    def step(self, action):
        right = action.strip() == str(self.at + 1)
        self.at += 1
        done = self.at >= self.goal
        obs = None if done else [Message(role="user", content=str(self.at))]
        if self.plain_tuples:  # a third-party environment's (observation, reward, done)
            return (None if done else str(self.at)), 1.0 if right else 0.0, done
        return StepResult(obs, 1.0 if right else 0.0, done, {} if right else {"invalid_action": True, "reason": "wrong"})

    def truncate(self):
        self.truncated += 1
        return StepResult(None, 0.5, True)


class Counter:
    def __init__(self, wrong_at=None):
        self.reset_with, self.seen, self.wrong_at = None, [], wrong_at

    def reset(self, task):
        self.reset_with = task

    def act(self, messages, tools):
        self.seen.append(len(messages))
        n = int(messages[-1].content) + 1
        text = "x" if len(self.seen) == self.wrong_at else str(n)
        return PolicyStep(message=Message(role="assistant", content=text), finish_reason="stop")


def test_an_episode_runs_until_the_environment_says_done():
    env, policy = CountTo(goal=3), Counter(wrong_at=2)
    traj = play_episode(env, policy, "0", max_turns=5)
    assert traj.stop_reason == "done" and len(traj.turns) == 3 and env.truncated == 0
    assert traj.metadata["step_rewards"] == [1.0, 0.0, 1.0] and traj.reward == 2.0
    assert traj.turns[1].error == "invalid action: wrong" and traj.turns[0].error is None
    assert policy.reset_with == "0" and policy.seen == [1, 3, 5]  # it sees every message so far
    assert [m.role for m in traj.messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]


def test_the_budget_ends_an_episode_and_the_environment_scores_it():
    env = CountTo(goal=10)
    traj = play_episode(env, Counter(), "0", max_turns=2)
    assert traj.stop_reason == "max_turns" and env.truncated == 1
    assert traj.metadata["step_rewards"] == [1.0, 1.5] and traj.reward == 2.5


def test_a_plain_tuple_environment_and_a_bad_budget():
    traj = play_episode(CountTo(goal=2, plain_tuples=True), Counter(), "0", max_turns=3)
    assert traj.reward == 2.0 and traj.messages[2].content == "1"
    with pytest.raises(ValueError, match="max_turns"):
        play_episode(CountTo(), Counter(), "0", max_turns=0)
