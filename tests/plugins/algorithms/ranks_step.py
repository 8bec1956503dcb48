"""One PPO update (one optimiser step: the mini-batch is the whole batch, so how samples are grouped
into mini-batches cannot differ) of the warm-up stage on the episodes every rank plays alike, split over the
ranks of a launcher (or whole, without one); rank 0 writes the step's metrics and the updated
actor's parameters to OUT. tests/plugins/algorithms/test_ranks.py compares 1 rank with 2.

    python -m torch.distributed.run --standalone --nproc_per_node 2 ranks_step.py OUT
    (KAG_RANKS_DEVICE=cuda: one GPU per rank, NCCL; bench/scripts/gpu_x2_ranks.sh)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch


def main(out: str) -> None:
    from kag.core.plugins import Plugins
    from kag.plugins.algorithms.ppo import ranks
    from kag.plugins.algorithms.ppo.config import train_config_from_dict
    from kag.plugins.algorithms.ppo.ppo_stage import batch_stats, prepare, update
    from kag.plugins.algorithms.ppo.rollout import collate, run_episodes, trajectory_to_sample

    train = {"model": "tiny", "environment": "copy-digit", "seed": 0, "actor_lr": 1e-3, "critic_lr": 1e-3,
             "episodes_per_step": 8, "mini_batch_size": 8, "micro_batch_size": 2, "max_new_tokens": 3,
             "ppo_epochs": 1, "steps": 1, "tensorboard": False, "engine": "deepspeed", "zero_stage": 3,
             "bf16": False, "device": os.environ.get("KAG_RANKS_DEVICE", "cpu"),
             "output_dir": f"{out}/stage-{ranks.world()}"}
    cfg = train_config_from_dict("warmup", {"train": train, "environments": {"copy-digit": {"digits": "0123"}}})
    plugins = Plugins(load_entrypoints=False)
    stage = plugins.create("algorithm", "warmup", config=cfg, plugins=plugins)
    stage.setup()
    envs = stage.make_envs(cfg.episodes_per_step)
    tasks = envs[0].sample_tasks(cfg.episodes_per_step, stage.rng)
    with stage.actor_engine.generation_context() as actor:  # the same 8 episodes on every rank
        trajs = run_episodes(actor, stage.tokenizer, envs, tasks, max_turns=1, max_new_tokens=3,
                             generator=torch.Generator().manual_seed(1), env_name="copy-digit")
    mine = ranks.shard(trajs)
    batch = collate([trajectory_to_sample(t) for t in mine], stage.tokenizer.pad_token_id, stage.device)
    metrics = {**batch_stats(batch), **prepare(stage, batch, None)}
    metrics.update(update(stage, batch, update_actor=True, update_critic=True))
    metrics["advantage_sum_sq"] = float((batch["advantages"] ** 2).sum())
    metrics = ranks.combine_metrics(metrics)
    metrics["advantage_sum_sq"] *= ranks.world()  # combine_metrics averaged it: the batch's total
    import deepspeed

    params = list(stage.actor.parameters())
    with deepspeed.zero.GatheredParameters(params):
        if ranks.is_main():
            state = {name: p.detach().clone() for name, p in stage.actor.named_parameters()}
            torch.save(state, Path(out) / f"actor-{ranks.world()}.pt")
            (Path(out) / f"metrics-{ranks.world()}.json").write_text(json.dumps(metrics))
    ranks.finish()


if __name__ == "__main__":
    main(sys.argv[1])
