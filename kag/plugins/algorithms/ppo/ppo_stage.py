"""PPO with a critic over environment episodes: the ``warmup`` (single-turn) and ``agentic``
(multi-turn) stages, and the critic-only update ``value-pretrain`` reuses."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import torch

from kag.plugins.algorithms.ppo import ranks
from kag.plugins.algorithms.ppo.base import Stage, resolve_model_dir
from kag.plugins.algorithms.ppo.gae import compute_gae, masked_mean, masked_whiten
from kag.plugins.algorithms.ppo.losses import (
    agg_loss, explained_variance, kl_penalty, policy_loss, truncated_is_weights, value_loss)
from kag.plugins.algorithms.ppo.config import adaptive_kl
from kag.plugins.algorithms.ppo.models import load_actor, token_logprobs, token_values
from kag.plugins.algorithms.ppo.rollout import collate, run_episodes, trajectory_to_sample


def _slices(n: int, size: int) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def micro_batches(idx: torch.Tensor, lengths: torch.Tensor, size: int, max_tokens: int = 0,
                  padded: bool = True) -> list[torch.Tensor]:
    """The micro-batches of the rows ``idx``: ``size`` rows each, or, with ``max_tokens`` (verl's dynamic batch
    size), as many rows as fit that many tokens, longest first, at least one row each: padded tokens (rows x
    the longest among them), or with ``padded=False`` (padding removal: the rows run packed) the sum of their
    lengths. Every loss is normalised by its whole mini-batch's token and sequence counts, so how a
    mini-batch is split never changes its gradient."""
    if max_tokens <= 0:
        return [idx[s] for s in _slices(len(idx), size)]
    order = idx[torch.argsort(lengths[idx], descending=True, stable=True)]
    sizes = [int(n) for n in lengths[order]]
    out: list[torch.Tensor] = []
    start = 0
    for j in range(1, len(order) + 1):
        cost = sizes[start] * (j - start + 1) if padded else sum(sizes[start:j + 1])
        if j == len(order) or cost > max_tokens:
            out.append(order[start:j])
            start = j
    return out


def _sub(batch: dict[str, torch.Tensor], idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """Rows ``idx`` of every tensor, trimmed to the longest real sequence among them."""
    out = {k: v[idx] for k, v in batch.items()}
    width = int(out["attention_mask"].sum(-1).max())
    for k in ("input_ids", "attention_mask"):
        out[k] = out[k][:, :width]
    for k, v in out.items():
        if v.dim() == 2 and k not in ("input_ids", "attention_mask"):
            out[k] = v[:, : width - 1]
    return out


@torch.no_grad()
def _forward_all(fn: Any, batch: dict[str, torch.Tensor], micro: int, max_tokens: int = 0,
                 padded: bool = True) -> torch.Tensor:
    n, width = batch["input_ids"].shape
    out = torch.zeros(n, width - 1, device=batch["input_ids"].device)
    rows = torch.arange(n, device=out.device)
    for idx in micro_batches(rows, batch["attention_mask"].sum(-1), micro, max_tokens, padded):
        sub = _sub(batch, idx)
        out[idx, : sub["input_ids"].shape[1] - 1] = fn(sub["input_ids"], sub["attention_mask"])
    return out


def prepare(stage: Stage, batch: dict[str, torch.Tensor], ref: Any | None) -> dict[str, float]:
    """Add old log-probs, values, advantages, returns and IS weights to ``batch`` in place."""
    cfg, mask, stats = stage.config, batch["mask"], {}
    rewards = batch["rewards"].clone()
    micro_args = (cfg.micro_batch_size, cfg.micro_batch_tokens, not cfg.remove_padding)
    if stage.actor is not None:
        batch["old_logp"] = _forward_all(lambda i, a: token_logprobs(
            stage.actor_forward, i, a, cfg.temperature, chunk_tokens=cfg.logit_chunk_tokens,
            remove_padding=cfg.remove_padding)[0], batch, *micro_args)
    if ref is not None:
        batch["ref_logp"] = _forward_all(lambda i, a: token_logprobs(
            ref, i, a, cfg.temperature, chunk_tokens=cfg.logit_chunk_tokens,
            remove_padding=cfg.remove_padding)[0], batch, *micro_args)
        kl = kl_penalty(batch["old_logp"], batch["ref_logp"], cfg.kl_type) * mask
        stats["kl_ref"] = float(masked_mean(kl, mask))
        if cfg.kl_mode == "reward":
            rewards = rewards - stage.kl_coef * kl
    batch["old_values"] = _forward_all(lambda i, a: token_values(stage.critic_forward, i, a, cfg.remove_padding),
                                       batch, *micro_args)
    adv, ret = compute_gae(rewards, batch["old_values"], mask, cfg.gamma, cfg.lam)
    batch["returns"] = ret
    batch["advantages"] = (masked_whiten(adv, mask, all_sum=ranks.all_sum if stage.split else None)
                           if cfg.whiten_advantages else adv)
    stats["explained_variance"] = explained_variance(batch["old_values"], ret, mask)
    stats["value_mean"] = float(masked_mean(batch["old_values"], mask))
    if cfg.use_tis and "rollout_logp" in batch and "old_logp" in batch:
        batch["is_weights"] = truncated_is_weights(batch["old_logp"], batch["rollout_logp"], mask, cfg.tis_cap)
        stats["tis_weight_mean"] = float(masked_mean(batch["is_weights"], mask))
        stats["rollout_trainer_logp_diff"] = float(masked_mean((batch["old_logp"] - batch["rollout_logp"]).abs(), mask))
    return stats


def _accumulate(acc: dict[str, list[float]], **kv: float) -> None:
    for k, v in kv.items():
        acc.setdefault(k, []).append(float(v))


def update(stage: Stage, batch: dict[str, torch.Tensor], update_actor: bool, update_critic: bool) -> dict[str, float]:
    """ppo_epochs passes over the batch in mini-batches; losses normalised by each mini-batch's
    token (and sequence) count so micro-batching does not change the gradient. On N ranks each
    holds 1/N of every mini-batch and divides by 1/N of the whole mini-batch's counts; DeepSpeed's
    mean over ranks then gives the gradient one rank would compute on the whole mini-batch."""
    cfg = stage.config
    n = batch["input_ids"].shape[0]
    acc: dict[str, list[float]] = {}
    gen = torch.Generator().manual_seed(cfg.seed + stage.step)
    for _ in range(cfg.ppo_epochs):
        perm = torch.randperm(n, generator=gen).to(batch["input_ids"].device)
        for mb in _slices(n, stage.local_mini_batch()):
            mb_idx = perm[mb]
            tokens = float(batch["mask"][mb_idx].sum().clamp(min=1.0))
            seqs = float((batch["mask"][mb_idx].sum(-1) > 0).sum().clamp(min=1.0))
            if stage.split:
                tokens, seqs = (max(v / ranks.world(), 1e-6) for v in ranks.all_sum([tokens, seqs]))
            micro = micro_batches(mb_idx, batch["attention_mask"].sum(-1), cfg.micro_batch_size, cfg.micro_batch_tokens,
                                  not cfg.remove_padding)
            if update_actor:
                mb_loss = 0.0
                for j, idx in enumerate(micro):
                    sub = _sub(batch, idx)
                    logp, ent = token_logprobs(stage.actor_forward, sub["input_ids"], sub["attention_mask"],
                                               cfg.temperature, with_entropy=True, entropy_grad=bool(cfg.entropy_coef),
                                               chunk_tokens=cfg.logit_chunk_tokens, remove_padding=cfg.remove_padding)
                    pl = policy_loss(logp, sub["old_logp"], sub["advantages"], sub["mask"], cfg.eps_low,
                                     cfg.eps_high, cfg.dual_clip_c, sub.get("is_weights"), cfg.loss_agg, tokens, seqs)
                    loss = pl.loss
                    ent_term = agg_loss(ent, sub["mask"], cfg.loss_agg, tokens, seqs)
                    if cfg.entropy_coef:
                        loss = loss - cfg.entropy_coef * ent_term
                    if stage.kl_coef and cfg.kl_mode == "loss" and "ref_logp" in sub:
                        loss = loss + stage.kl_coef * agg_loss(kl_penalty(logp, sub["ref_logp"], cfg.kl_type),
                                                             sub["mask"], cfg.loss_agg, tokens, seqs)
                    stage.actor_engine.backward(loss, last_micro=j == len(micro) - 1)
                    mb_loss += float(pl.loss.detach())
                    _accumulate(acc, clip_frac=pl.clip_frac,
                                dual_clip_frac=pl.dual_clip_frac, approx_kl=pl.approx_kl,
                                entropy=float(masked_mean(ent.detach(), sub["mask"])))
                _accumulate(acc, policy_loss=mb_loss, actor_grad_norm=stage.actor_engine.step())
            if update_critic:
                mb_vloss = 0.0
                for j, idx in enumerate(micro):
                    sub = _sub(batch, idx)
                    values = token_values(stage.critic_forward, sub["input_ids"], sub["attention_mask"],
                                          cfg.remove_padding)
                    vl = value_loss(values, sub["old_values"], sub["returns"], sub["mask"], cfg.value_clip,
                                    cfg.loss_agg, tokens, seqs)
                    stage.critic_engine.backward(vl.loss, last_micro=j == len(micro) - 1)
                    mb_vloss += float(vl.loss.detach())
                    _accumulate(acc, value_clip_frac=vl.clip_frac)
                _accumulate(acc, value_loss=mb_vloss, critic_grad_norm=stage.critic_engine.step())
    return {k: sum(v) / len(v) for k, v in acc.items()}


def batch_stats(batch: dict[str, torch.Tensor]) -> dict[str, float]:
    return {"reward_mean": float(batch["seq_reward"].mean()), "reward_std": float(batch["seq_reward"].std(unbiased=False)),
            "traj_tokens": float(batch["attention_mask"].sum(-1).float().mean()),
            "response_tokens": float(batch["mask"].sum(-1).mean()), "turns": float(batch["turns"].mean())}


def success_rate(trajs: list[Any]) -> dict[str, float]:
    """What the environment's step infos say: ``right_frac`` (steps marked ``right``) and, from the
    kernel environments' evaluator verdicts, per episode: ``pass_frac`` (a correct solution) and
    ``faster_than_compile_frac`` (a correct one faster than torch.compile)."""
    infos = [t.metadata.get("step_info", []) for t in trajs]
    flags = [i["right"] for steps in infos for i in steps if "right" in i]
    out = {"right_frac": sum(map(bool, flags)) / len(flags)} if flags else {}
    judged = [steps for steps in infos if any("correct" in i for i in steps)]
    if judged:
        out["pass_frac"] = sum(any(i.get("correct") for i in steps) for steps in judged) / len(judged)
        out["faster_than_compile_frac"] = sum(
            any(i.get("correct") and (i.get("speedup_vs_compile") or 0.0) > 1.0 for i in steps)
            for steps in judged) / len(judged)
    return out


class PPOStage(Stage):
    """Samples episodes from the environment with the current actor, then one PPO update."""

    name = "agentic"
    needs_critic = True
    trains_actor = True
    single_turn = False
    splits_over_ranks = True  # each rank plays episodes_per_step / N episodes (kag.plugins.algorithms.ppo.ranks)

    def _reference(self) -> Any | None:
        cfg = self.config
        if not cfg.kl_coef:
            return None
        spec = str(resolve_model_dir(cfg.init_from, "actor")) if cfg.init_from else cfg.model
        ref, _ = load_actor(spec, seed=cfg.seed)
        return ref.to(self.device, dtype=self.weight_dtype).eval().requires_grad_(False)

    def _run(self) -> dict[str, Any]:
        self.setup()
        cfg = self.config
        ref = self._reference()
        rollout = self._rollout_engine()
        envs = self.make_envs(cfg.episodes_per_step // ranks.world())
        max_turns = 1 if self.single_turn else cfg.max_turns
        last: dict[str, Any] = {}
        while self.step < cfg.steps:
            t0 = time.time()
            if rollout is not None:
                rollout.sync_weights(self.actor)  # the engine samples with this step's actor
            tasks = ranks.shard(envs[0].sample_tasks(cfg.episodes_per_step, self.rng))  # every rank draws all
            sampling = self.actor_engine.generation_context() if rollout is None else contextlib.nullcontext(self.actor)
            with sampling as actor:  # gathered under ZeRO-3 only where the actor samples itself
                trajs = run_episodes(actor, self.tokenizer, envs, tasks, max_turns=max_turns,
                                     max_new_tokens=cfg.max_new_tokens, max_context=cfg.max_context,
                                     temperature=cfg.temperature, generator=self.generator,
                                     env_name=cfg.environment, sampler=rollout.sample if rollout is not None else None,
                                     env_workers=cfg.env_workers)
            t_roll = time.time() - t0
            if rollout is not None:
                rollout.sleep()  # frees the engine's GPU memory for the update (when sleep mode is on)
            batch = collate([trajectory_to_sample(t) for t in trajs], self.tokenizer.pad_token_id, self.device)
            metrics = {**batch_stats(batch), **success_rate(trajs)}
            metrics.update(prepare(self, batch, ref))
            metrics["lr_factor"] = self.apply_lr_schedule(cfg.steps)
            train_actor = self.step >= cfg.critic_warmup_steps
            metrics.update(update(self, batch, update_actor=train_actor, update_critic=True))
            if cfg.kl_target is not None and "kl_ref" in metrics:  # used this step (reward and loss); next: moved
                kl = ranks.combine_metrics({"kl_ref": metrics["kl_ref"]})["kl_ref"]  # the same on every rank
                metrics["kl_coef"] = self.kl_coef
                self.kl_coef = adaptive_kl(self.kl_coef, kl, cfg.kl_target, cfg.episodes_per_step, cfg.kl_horizon)
            self.step += 1
            metrics.update(rollout_s=t_roll, step_s=time.time() - t0, episodes=len(trajs),
                           tokens_per_s=float(batch["attention_mask"].sum()) / max(time.time() - t0, 1e-9))
            metrics = ranks.combine_metrics(metrics)  # the step's row: means over ranks, tokens/s summed
            self.logger.log(self.step, metrics)
            self.maybe_checkpoint(last=self.step >= cfg.steps)
            last = metrics
        self.logger.close()
        if rollout is not None:
            rollout.shutdown()
        return {"stage": self.name, "step": self.step, "output_dir": str(self.out), **last}

    def _rollout_engine(self) -> Any | None:
        """The vLLM engine when ``rollout_engine = "vllm"`` (built from the actor as it is now)."""
        cfg = self.config
        if cfg.rollout_engine != "vllm":
            return None
        from kag.plugins.algorithms.ppo.vllm_rollout import VLLMRollout, export_for_vllm

        path = export_for_vllm(self.actor, self.tokenizer, self.out / "rollout_model")
        options = {"seed": cfg.seed, "max_model_len": cfg.max_context, **cfg.vllm_options}
        return VLLMRollout(path, **options)


class WarmupPPO(PPOStage):
    """Single-turn PPO: one response per prompt, scored by the environment."""

    name = "warmup"
    single_turn = True


class AgenticPPO(PPOStage):
    """Multi-turn PPO from the RFT actor and the pretrained critic; observation tokens masked."""

    name = "agentic"
