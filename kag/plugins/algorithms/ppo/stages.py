"""The data stages around PPO: ``collect`` (trajectories from the current actor), ``rft``
(rejection fine-tuning on the good ones) and ``value-pretrain`` (fit the critic to GAE targets)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import torch

from kag.plugin import STOP, StopRequested, Trajectory, append_jsonl, load_trajectories, read_jsonl
from kag.plugins.algorithms.ppo.base import Stage
from kag.plugins.algorithms.ppo.gae import masked_mean
from kag.plugins.algorithms.ppo.losses import agg_loss
from kag.plugins.algorithms.ppo.models import token_logprobs
from kag.plugins.algorithms.ppo.ppo_stage import _sub, batch_stats, micro_batches, prepare, success_rate, update
from kag.plugins.algorithms.ppo.rft import RftFilter, filter_trajectories
from kag.plugins.algorithms.ppo.rollout import collate, run_episodes, trajectory_to_sample


def read_trajectories(path: str | Path) -> list[Trajectory]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"trajectories file {path} does not exist; run `kag train collect` first "
                                f"or point data = \"...\" at a JSONL of trajectories")
    return load_trajectories(path)


def rft_rules(cfg: Any) -> RftFilter:
    return RftFilter(cfg.rft_min_reward, cfg.rft_max_identical_repeats, cfg.rft_max_loop_period,
                     cfg.rft_min_loop_repeats, cfg.rft_reject_invalid)


class Collect(Stage):
    """Play ``num_episodes`` multi-turn episodes with the actor; append them to ``data``."""

    name = "collect"

    def total_steps(self) -> int:
        return math.ceil(self.config.num_episodes / self.config.episodes_per_step)

    def data_path(self) -> Path:
        return Path(self.config.data) if self.config.data else self.out / "trajectories.jsonl"

    def save_checkpoint(self) -> Path:  # the JSONL is the product; only the RNG state is saved
        self.ckpt.mkdir(parents=True, exist_ok=True)
        state = {"step": self.step, "stage": self.name, "finished": self.finished, "python_rng": self.rng.getstate(),
                 "torch_generator": self.generator.get_state().tolist()}
        tmp = self.ckpt / "state.json.tmp"
        tmp.write_text(json.dumps(state))
        tmp.replace(self.ckpt / "state.json")
        return self.ckpt

    def _run(self) -> dict[str, Any]:
        self.setup()
        cfg, path = self.config, self.data_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        done = len(read_jsonl(path)) if cfg.resume else 0  # a torn last line is not an episode
        if not cfg.resume and path.exists():
            path.unlink()
        envs = self.make_envs(cfg.episodes_per_step)
        rules = rft_rules(cfg)
        if cfg.resume:
            self._log_steps_written_before_a_kill(path, done)
        while done < cfg.num_episodes:
            t0 = time.time()
            n = min(cfg.episodes_per_step, cfg.num_episodes - done)
            tasks = envs[0].sample_tasks(n, self.rng)
            trajs = run_episodes(self.actor, self.tokenizer, envs[:n], tasks, max_turns=cfg.max_turns,
                                 max_new_tokens=cfg.max_new_tokens, max_context=cfg.max_context,
                                 temperature=cfg.temperature, generator=self.generator, env_name=cfg.environment,
                                 env_workers=cfg.env_workers)
            for traj in trajs:
                traj.policy = "actor"
            append_jsonl(path, *trajs)
            done += n
            self.step += 1
            row, tokens = self._step_row(trajs, done, rules)
            step_s = time.time() - t0
            self.logger.log(self.step, {**row, "step_s": step_s, "tokens_per_s": tokens / max(step_s, 1e-9)})
            self.finished = done >= cfg.num_episodes
            self.save_checkpoint()
            if STOP.is_set() and done < cfg.num_episodes:  # Ctrl-C: the episodes so far are kept
                raise StopRequested(f"stopped after {done} episodes (in {path}); a rerun collects the rest")
        if not self.finished:  # killed after the last episodes were written, before their checkpoint
            self.finished = True
            self.save_checkpoint()
        self.logger.close()
        return {"stage": self.name, "episodes": done, "data": str(path)}

    def _step_row(self, trajs: list[Trajectory], done: int, rules: RftFilter) -> tuple[dict[str, Any], float]:
        """A step's metrics from its episodes (``done``: episodes collected so far), and its tokens."""
        kept, _ = filter_trajectories(trajs, rules)
        batch = collate([trajectory_to_sample(t) for t in trajs], self.tokenizer.pad_token_id)
        row = {**batch_stats(batch), **success_rate(trajs), "episodes": done, "kept_frac": len(kept) / len(trajs)}
        return row, float(batch["attention_mask"].sum())

    def _log_steps_written_before_a_kill(self, path: Path, done: int) -> None:
        """A run killed after it appended a step's episodes and before it logged that step (its
        checkpoint is the step before) left episodes no metrics row counts: log their rows from the
        file, marked ``recovered`` (no timing), so steps and episodes agree again."""
        cfg, per = self.config, self.config.episodes_per_step
        written = math.ceil(done / per) if done >= cfg.num_episodes else done // per  # whole steps only
        if written <= self.step:
            return
        trajs = read_trajectories(path)
        rules = rft_rules(cfg)
        while self.step < written:
            chunk = trajs[self.step * per:min((self.step + 1) * per, done)]
            self.step += 1
            row, _ = self._step_row(chunk, min(self.step * per, done), rules)
            self.logger.log(self.step, {**row, "recovered": True})
        self.finished = done >= cfg.num_episodes
        self.save_checkpoint()


class RejectionFineTune(Stage):
    """Fine-tune the actor on kept trajectories, loss on the model's own tokens only."""

    name = "rft"
    trains_actor = True

    def _run(self) -> dict[str, Any]:
        self.setup()
        cfg = self.config
        trajs = read_trajectories(cfg.data)
        kept, drops = filter_trajectories(trajs, rft_rules(cfg))
        if not kept:
            raise ValueError(f"{cfg.data}: none of {len(trajs)} trajectories passed the RFT filter "
                             f"(dropped: {drops}); collect more or relax rft_min_reward")
        samples = [trajectory_to_sample(t) for t in kept]
        per_epoch = math.ceil(len(samples) / cfg.mini_batch_size)
        total = self.logger.total = per_epoch * cfg.rft_epochs
        base = {"kept": len(kept), "collected": len(trajs), **{f"dropped_{k}": v for k, v in drops.items()}}
        last: dict[str, Any] = {}
        while self.step < total:
            t0 = time.time()
            epoch, within = divmod(self.step, per_epoch)
            order = torch.randperm(len(samples), generator=torch.Generator().manual_seed(cfg.seed + epoch)).tolist()
            chosen = [samples[i] for i in order[within * cfg.mini_batch_size:(within + 1) * cfg.mini_batch_size]]
            batch = collate(chosen, self.tokenizer.pad_token_id, self.device)
            tokens = float(batch["mask"].sum().clamp(min=1.0))
            seqs = float(len(chosen))
            loss_sum, ent_sum, kl_sum = 0.0, 0.0, 0.0
            lr = self.apply_lr_schedule(total)
            micro = micro_batches(torch.arange(len(chosen), device=self.device), batch["attention_mask"].sum(-1),
                                  cfg.micro_batch_size, cfg.micro_batch_tokens, not cfg.remove_padding)
            for j, idx in enumerate(micro):
                sub = _sub(batch, idx)
                logp, ent = token_logprobs(self.actor_forward, sub["input_ids"], sub["attention_mask"], cfg.temperature,
                                           True, chunk_tokens=cfg.logit_chunk_tokens, remove_padding=cfg.remove_padding)
                loss = agg_loss(-logp, sub["mask"], cfg.loss_agg, tokens, seqs)
                self.actor_engine.backward(loss, last_micro=j == len(micro) - 1)
                loss_sum += float(loss.detach())
                ent_sum += float((ent.detach() * sub["mask"]).sum())
                if "rollout_logp" in sub:  # k1 estimate of KL(rollout policy || current actor)
                    kl_sum += float(((sub["rollout_logp"] - logp.detach()) * sub["mask"]).sum())
            grad_norm = self.actor_engine.step()
            self.step += 1
            last = {**batch_stats(batch), **base, "sft_loss": loss_sum, "entropy": ent_sum / tokens,
                    "kl_from_rollout": kl_sum / tokens, "actor_grad_norm": grad_norm, "epoch": epoch, "lr_factor": lr,
                    "keep_rate": len(kept) / len(trajs), "step_s": time.time() - t0,
                    "tokens_per_s": float(batch["attention_mask"].sum()) / max(time.time() - t0, 1e-9)}
            self.logger.log(self.step, last)
            self.maybe_checkpoint(last=self.step >= total)
        self.logger.close()
        return {"stage": self.name, "step": self.step, "output_dir": str(self.out), **base, **last}


class ValuePretrain(Stage):
    """Fit the critic to GAE returns (recomputed with the current critic each step) on collected
    trajectories, before agentic PPO lets its advantages steer the actor."""

    name = "value-pretrain"
    needs_actor = False
    needs_critic = True

    def _run(self) -> dict[str, Any]:
        self.setup()
        cfg = self.config
        samples = [trajectory_to_sample(t) for t in read_trajectories(cfg.data)]
        if not samples:
            raise ValueError(f"{cfg.data}: no trajectories to fit the critic on")
        last: dict[str, Any] = {}
        while self.step < cfg.steps:
            t0 = time.time()
            chosen = [samples[self.rng.randrange(len(samples))] for _ in range(cfg.episodes_per_step)]
            batch = collate(chosen, self.tokenizer.pad_token_id, self.device)
            metrics = batch_stats(batch)
            metrics.update(prepare(self, batch, ref=None))
            metrics["lr_factor"] = self.apply_lr_schedule(cfg.steps)
            metrics.update(update(self, batch, update_actor=False, update_critic=True))
            metrics["returns_mean"] = float(masked_mean(batch["returns"], batch["mask"]))
            self.step += 1
            metrics["step_s"] = time.time() - t0
            metrics["tokens_per_s"] = float(batch["attention_mask"].sum()) / max(metrics["step_s"], 1e-9)
            self.logger.log(self.step, metrics)
            self.maybe_checkpoint(last=self.step >= cfg.steps)
            last = metrics
        self.logger.close()
        return {"stage": self.name, "step": self.step, "output_dir": str(self.out), **last}
