"""Token-in/token-out rollouts: masks, per-turn rewards, chat continuation, sampler log-probs."""

import random

import pytest
import torch

from kag.core.agent.environment import Environment, StepResult, as_step_result
from kag.core.records import Message, Trajectory, Turn
from kag.plugins.algorithms.ppo.models import ChatFormat, critic_from_actor, token_logprobs, token_values
from kag.plugins.algorithms.ppo.rollout import collate, run_episodes, sample_tokens, trajectory_to_sample
from kag.plugins.algorithms.ppo.tiny import make_tiny
from kag.plugins.environments.toy_env import CopyDigitEnv


@pytest.fixture(scope="module")
def tiny():
    return make_tiny(seed=0)


def test_trajectory_to_sample_masks_observations_and_places_turn_rewards():
    # turn 0: prompt [1,2] response [3,4]; turn 1: observation+gen prompt [5,6] response [7]
    traj = Trajectory(episode_id="e", task="t", reward=1.5, metadata={"step_rewards": [0.5, 1.0]}, turns=[
        Turn(index=0, response=Message("assistant", "a"), prompt_token_ids=[1, 2], response_token_ids=[3, 4],
             response_logprobs=[-0.1, -0.2]),
        Turn(index=1, response=Message("assistant", "b"), prompt_token_ids=[5, 6], response_token_ids=[7],
             response_logprobs=[-0.3])])
    s = trajectory_to_sample(traj)
    assert s.ids == [1, 2, 3, 4, 5, 6, 7]
    assert s.model_mask == [0, 0, 1, 1, 0, 0, 1]
    assert s.token_rewards == [0, 0, 0, 0.5, 0, 0, 1.0]
    assert s.rollout_logp == [0, 0, -0.1, -0.2, 0, 0, -0.3]
    # the same trajectory recorded with whole-context prompts gives the same sequence
    traj.turns[1].prompt_token_ids = [1, 2, 3, 4, 5, 6]
    assert trajectory_to_sample(traj).ids == s.ids
    # without per-turn rewards the total goes on the last model token
    traj.metadata = {}
    assert trajectory_to_sample(traj).token_rewards == [0, 0, 0, 0, 0, 0, 1.5]
    batch = collate([s], pad_id=0)
    # shifted by one: position i is about token i+1
    assert batch["mask"].tolist() == [[0, 1, 1, 0, 0, 1]]
    assert batch["rewards"].tolist() == [[0, 0, 0.5, 0, 0, 1.0]]
    assert batch["rollout_logp"].tolist() == [pytest.approx([0, -0.1, -0.2, 0, 0, -0.3])]


def test_chat_continuation_appends_exactly_what_a_full_render_would(tiny):
    _, tok = tiny
    chat = ChatFormat(tok)
    first = [Message("user", "copy 7")]
    prompt = chat.prompt_ids(first)
    response = tok.encode("7", add_special_tokens=False) + [tok.eos_token_id]
    obs = [Message("tool", "next 3")]
    cont = chat.continuation_ids(obs)
    full = chat.prompt_ids(first + [Message("assistant", "7")] + obs)
    assert prompt + response + cont == full
    assert tok.decode(cont) == "<|tool|>next 3<|end|><|assistant|>"


def test_sampler_logprobs_match_trainer_logprobs(tiny):
    model, tok = tiny
    chat = ChatFormat(tok)
    prompts = [chat.prompt_ids([Message("user", "copy 1")]), chat.prompt_ids([Message("user", "copy 42 please")])]
    gens = sample_tokens(model, prompts, 6, tok.eos_token_id, tok.pad_token_id, generator=torch.Generator().manual_seed(0))
    for p, (ids, lps) in zip(prompts, gens):
        seq = torch.tensor([p + ids])
        logp, _ = token_logprobs(model, seq, torch.ones_like(seq))
        assert logp[0, len(p) - 1:].tolist() == pytest.approx(lps, abs=1e-4)  # left padding changed nothing


def test_multi_turn_episode_through_the_protocol(tiny):
    model, tok = tiny
    envs = [CopyDigitEnv(turns=3) for _ in range(4)]
    assert isinstance(envs[0], Environment)
    tasks = envs[0].sample_tasks(4, random.Random(0))
    trajs = run_episodes(model, tok, envs, tasks, max_turns=3, max_new_tokens=3,
                         generator=torch.Generator().manual_seed(1))
    for traj in trajs:
        assert len(traj.turns) == 3 and traj.stop_reason == "done"
        s = trajectory_to_sample(traj)
        # observation tokens ("<|tool|>next D<|end|><|assistant|>") are masked; a reply cut at
        # max_new_tokens before its eos gets the eos from them, as the chat template renders the turn
        obs = [tok.decode(traj.turns[i].prompt_token_ids) for i in (1, 2)]
        ended = [traj.turns[i].response_token_ids[-1] == tok.eos_token_id for i in (0, 1)]
        assert obs == [("" if ended[0] else "<|end|>") + f"<|tool|>next {traj.task[1]}<|end|><|assistant|>",
                       ("" if ended[1] else "<|end|>") + f"<|tool|>next {traj.task[2]}<|end|><|assistant|>"]
        assert sum(s.model_mask) == sum(len(t.response_token_ids) for t in traj.turns)
        assert traj.reward == pytest.approx(sum(traj.metadata["step_rewards"]))
    critic = critic_from_actor(model)
    batch = collate([trajectory_to_sample(t) for t in trajs], tok.pad_token_id)
    assert token_values(critic, batch["input_ids"], batch["attention_mask"]).shape == batch["mask"].shape


def test_copy_digit_env_rewards_and_invalid_actions():
    env = CopyDigitEnv(turns=2, wrong_reward=-1.0)
    assert env.reset("73")[0].content == "copy 7"
    obs, reward, done = env.step(" 7 and more")
    assert (reward, done, obs[0].content) == (0.5, False, "next 3")
    res = env.step("x")
    assert (res.reward, res.done, res.info["invalid_action"]) == (-0.5, True, True)
    exact = CopyDigitEnv(match="exact")
    exact.reset("5")
    assert exact.step("55").reward == 0.0
    with pytest.raises(ValueError, match="match"):
        CopyDigitEnv(match="fuzzy")
    with pytest.raises(ValueError, match="2 digit"):
        env.reset("7")
    assert as_step_result((None, 1, True)) == StepResult(None, 1.0, True, {})
    assert as_step_result(("hi", 0.0, False)).observation == [Message("user", "hi")]
    with pytest.raises(TypeError, match="must return"):
        as_step_result([1, 2, 3])


class _ScoredAtTheEnd(CopyDigitEnv):
    """A multi-turn environment that gives its verdict when the trainer cuts the episode short."""

    def truncate(self):
        from kag.core.agent.environment import StepResult

        return StepResult(None, 10.0, True, {})


def test_a_budget_cut_episode_is_scored_by_the_environment(tiny):
    model, tok = tiny
    envs = [_ScoredAtTheEnd(turns=3) for _ in range(2)]
    tasks = envs[0].sample_tasks(2, random.Random(0))
    trajs = run_episodes(model, tok, envs, tasks, max_turns=1, max_new_tokens=3, max_context=4096)
    for traj in trajs:
        assert traj.stop_reason == "max_turns"
        assert traj.reward >= 10.0 - 1.0  # the final verdict is added to the last step's reward


class _SlowEnv(_ScoredAtTheEnd):
    """Each step and the final verdict take 0.4 s (an evaluation), and say when they ran."""

    def __init__(self, spans, **kw):
        super().__init__(**kw)
        self.spans = spans

    def _timed(self, fn, *args):
        import time

        t0 = time.perf_counter()
        time.sleep(0.4)
        out = fn(*args)
        self.spans.append((t0, time.perf_counter()))
        return out

    def step(self, action):
        return self._timed(super().step, action)

    def truncate(self):
        return self._timed(super().truncate)


def test_env_workers_step_the_episodes_at_once_and_give_the_same_trajectories(tiny):
    model, tok = tiny
    got = {}
    for workers in (1, 4):
        spans: list = []
        envs = [_SlowEnv(spans, turns=3) for _ in range(4)]
        tasks = envs[0].sample_tasks(4, random.Random(0))
        got[workers] = (run_episodes(model, tok, envs, tasks, max_turns=2, max_new_tokens=3, env_workers=workers,
                                     generator=torch.Generator().manual_seed(1)), spans)
    (seq, seq_spans), (par, par_spans) = got[1], got[4]
    assert len(seq_spans) == len(par_spans) == 4 * 3  # two steps and the budget's verdict per episode
    overlaps = lambda spans: sum(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans)  # noqa: E731
                                 for b in spans[i + 1:])
    assert overlaps(seq_spans) == 0 and overlaps(par_spans) >= 3 * 6  # each turn's 4 steps ran together
    for a, b in zip(seq, par):
        assert (a.task, a.reward, a.stop_reason) == (b.task, b.reward, b.stop_reason)
        assert [t.response_token_ids for t in a.turns] == [t.response_token_ids for t in b.turns]
        assert a.metadata["step_rewards"] == b.metadata["step_rewards"] and a.reward >= 10.0 - 2.0
