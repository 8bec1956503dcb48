"""Rollouts through the environment protocol, kept as token ids (token-in, token-out).

Every token the model sampled is kept with its log-prob; observations are rendered once, when
they arrive, and appended: the history is never re-tokenised. A ``Trajectory`` records each turn's
newly appended prompt tokens (``prompt_token_ids``: the whole prompt on turn 0, then observation
tokens plus the next generation prompt) and the response's ids and log-probs, so
``trajectory_to_sample`` rebuilds exactly the sequence the model saw.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any, Callable, Sequence

import attrs
import torch

from kag.plugin import Message, Trajectory, Turn, as_step_result, plain_info, step_error, truncation
from kag.plugins.algorithms.ppo.models import ChatFormat, position_ids


@torch.no_grad()
def sample_tokens(
    actor: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int, eos_id: int, pad_id: int,
    temperature: float = 1.0, generator: torch.Generator | None = None,
) -> list[tuple[list[int], list[float]]]:
    """Sample continuations of a batch of prompts (left padded, KV cache); stop at eos.

    Returns per prompt the sampled ids (eos included when reached) and their log-probs under
    softmax(logits / temperature), the same quantity the trainer computes.
    """
    device = next(actor.parameters()).device
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(prompts), width), dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
        attn[b, width - len(p):] = 1
    ids, attn = ids.to(device), attn.to(device)
    pos = position_ids(attn)
    past = None
    done = [False] * len(prompts)
    out: list[tuple[list[int], list[float]]] = [([], []) for _ in prompts]
    step_ids = ids
    for _ in range(max_new_tokens):
        res = actor(input_ids=step_ids, attention_mask=attn, position_ids=pos, past_key_values=past, use_cache=True)
        past = res.past_key_values
        logp_all = torch.log_softmax(res.logits[:, -1].float() / temperature, dim=-1)
        tok = torch.multinomial(logp_all.exp().cpu(), 1, generator=generator).squeeze(-1).to(device)
        lp = logp_all.gather(-1, tok[:, None]).squeeze(-1)
        for b, (t, l) in enumerate(zip(tok.tolist(), lp.tolist())):
            if not done[b]:
                out[b][0].append(t)
                out[b][1].append(l)
                done[b] = t == eos_id
        if all(done):
            break
        step_ids = tok[:, None]
        attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
        pos = pos[:, -1:] + 1
    return out


@attrs.define
class _Episode:
    env: Any
    traj: Trajectory
    pending: list[int]
    context: list[int]
    done: bool = False


def run_episodes(
    actor: Any, tokenizer: Any, envs: Sequence[Any], tasks: Sequence[Any], *, max_turns: int,
    max_new_tokens: int, max_context: int = 4096, temperature: float = 1.0,
    generator: torch.Generator | None = None, env_name: str = "environment", sampler: Any | None = None,
    env_workers: int = 1,
) -> list[Trajectory]:
    """Play one episode per (env, task) in lock step, batching generation across episodes.

    ``sampler`` (same arguments as ``sample_tokens`` without the actor, e.g. a vLLM engine's
    ``sample``) replaces sampling with the actor itself. ``env_workers`` > 1 steps that many
    episodes' environments at once (their evaluations overlap: on this machine's GPU pool, or on an
    executor's workers when the environments were given one); the trajectories are the same.
    """
    if len(envs) < len(tasks):
        raise ValueError(f"{len(tasks)} tasks need as many environment slots, got {len(envs)}")
    chat = ChatFormat(tokenizer)
    eps: list[_Episode] = []
    for env, task in zip(envs, tasks):
        messages = list(env.reset(task))
        prompt = chat.prompt_ids(messages)
        traj = Trajectory(episode_id=uuid.uuid4().hex[:12], task=str(task), messages=messages,
                          metadata={"step_rewards": [], "step_info": []})
        eps.append(_Episode(env, traj, pending=prompt, context=list(prompt)))
    was_training = actor.training
    actor.eval()
    try:
        for turn_index in range(max_turns):
            live = [e for e in eps if not e.done]
            if not live:
                break
            sample = sampler or (lambda *a: sample_tokens(actor, *a))
            gens = sample([e.context for e in live], max_new_tokens, tokenizer.eos_token_id,
                          tokenizer.pad_token_id, temperature, generator)
            texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids, _ in gens]
            results = _run_all([functools.partial(e.env.step, text) for e, text in zip(live, texts)], env_workers)
            cut: list[_Episode] = []  # ended by the trainer's budget: scored together below
            for e, (ids, logps), text, stepped in zip(live, gens, texts, results):
                result = as_step_result(stepped, env_name)
                response = Message(role="assistant", content=text)
                obs = list(result.observation or [])
                turn = Turn(index=turn_index, response=response, observations=obs, prompt_token_ids=e.pending,
                            response_token_ids=list(ids), response_logprobs=list(logps),
                            error=step_error(result.info))
                e.traj.turns.append(turn)
                e.traj.messages.extend([response, *obs])
                e.traj.metadata["step_rewards"].append(float(result.reward))
                e.traj.metadata["step_info"].append(plain_info(result.info))
                e.context.extend(ids)
                if result.done:
                    e.done, e.traj.stop_reason = True, "done"
                    continue
                if turn_index + 1 == max_turns:
                    e.done, e.traj.stop_reason = True, "max_turns"
                    cut.append(e)
                    continue
                e.pending = chat.continuation_ids(obs, after_eos=bool(ids) and ids[-1] == tokenizer.eos_token_id)
                if len(e.context) + len(e.pending) + max_new_tokens > max_context:
                    e.done, e.traj.stop_reason = True, "max_context"
                    cut.append(e)
                    continue
                e.context.extend(e.pending)
            for e, result in zip(cut, _run_all([functools.partial(truncation, e.env) for e in cut], env_workers)):
                if result is not None:
                    e.traj.metadata["step_rewards"][-1] += float(getattr(result, "reward", 0.0) or 0.0)
    finally:
        actor.train(was_training)
    for e in eps:
        e.traj.reward = float(sum(e.traj.metadata["step_rewards"]))
    return [e.traj for e in eps]


def _run_all(calls: list[Callable[[], Any]], workers: int) -> list[Any]:
    """Each call, ``workers`` at once, results in order; the first error is raised after every
    call ended (an environment's own failure, as a sequential loop would)."""
    if workers <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(workers, len(calls)), thread_name_prefix="kag-env-step") as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


@attrs.define
class Sample:
    """One trajectory as a flat token sequence with the model-token mask and rewards on tokens."""

    ids: list[int]
    model_mask: list[int]
    rollout_logp: list[float] | None
    token_rewards: list[float]
    reward: float
    turns: int


def trajectory_to_sample(traj: Trajectory) -> Sample:
    """Rebuild the token sequence of a trajectory; each turn's reward sits on its last token.

    Accepts turns whose ``prompt_token_ids`` hold either the newly appended tokens or the whole
    context so far (the prefix already seen is then cut off).
    """
    ids: list[int] = []
    mask: list[int] = []
    logp: list[float] = []
    rewards: list[float] = []
    have_logp = all(len(t.response_logprobs) == len(t.response_token_ids) for t in traj.turns)
    step_rewards = traj.metadata.get("step_rewards")
    if not step_rewards or len(step_rewards) != len(traj.turns):
        step_rewards = [0.0] * (len(traj.turns) - 1) + [float(traj.reward or 0.0)]
    last_model = -1
    for turn, r in zip(traj.turns, step_rewards):
        new = list(turn.prompt_token_ids)
        if ids and new[: len(ids)] == ids:
            new = new[len(ids):]
        ids += new
        mask += [0] * len(new)
        logp += [0.0] * len(new)
        rewards += [0.0] * len(new)
        ids += turn.response_token_ids
        mask += [1] * len(turn.response_token_ids)
        logp += list(turn.response_logprobs) if have_logp else [0.0] * len(turn.response_token_ids)
        rewards += [0.0] * len(turn.response_token_ids)
        if turn.response_token_ids:
            last_model = len(ids) - 1
        if last_model >= 0:
            rewards[last_model] += float(r)
    if last_model <= 0:
        raise ValueError(f"trajectory {traj.episode_id} has no model tokens after a prompt; nothing to train on")
    return Sample(ids, mask, logp if have_logp else None, rewards, float(traj.reward or 0.0), len(traj.turns))


def collate(samples: Sequence[Sample], pad_id: int, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Right-padded (B, L) ids/attention and (B, L-1) tensors aligned to the predicted tokens."""
    width = max(len(s.ids) for s in samples)
    n = len(samples)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    attn = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.float32)
    rewards = torch.zeros((n, width), dtype=torch.float32)
    rlogp = torch.zeros((n, width), dtype=torch.float32)
    for b, s in enumerate(samples):
        k = len(s.ids)
        ids[b, :k] = torch.tensor(s.ids)
        attn[b, :k] = 1
        mask[b, :k] = torch.tensor(s.model_mask, dtype=torch.float32)
        rewards[b, :k] = torch.tensor(s.token_rewards)
        if s.rollout_logp is not None:
            rlogp[b, :k] = torch.tensor(s.rollout_logp)
    batch = {"input_ids": ids, "attention_mask": attn, "mask": mask[:, 1:], "rewards": rewards[:, 1:],
             "seq_reward": torch.tensor([s.reward for s in samples]),
             "turns": torch.tensor([float(s.turns) for s in samples])}
    if all(s.rollout_logp is not None for s in samples):
        batch["rollout_logp"] = rlogp[:, 1:]
    return {k: v.to(device) for k, v in batch.items()}
