"""Training engines: the DeepSpeed ZeRO path (config, stages end to end, checkpoint and resume) and
the engine choice in the train config.

The DeepSpeed tests run where DeepSpeed imports (``-m deepspeed``); DeepSpeed falls back to its CPU
accelerator without CUDA, so they run on the CPU too (bf16, ZeRO-2, gloo). bench/scripts/gpu_rl.sh runs
the same stages on a GPU.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from kag.core.plugins import Plugins
from kag.plugins.algorithms.ppo.config import train_config_from_dict
from kag.plugins.algorithms.ppo.engine import deepspeed_config

NO_DEEPSPEED = importlib.util.find_spec("deepspeed") is None


def test_deepspeed_config_is_zero_with_bf16_and_adamw():
    cfg = deepspeed_config(lr=3e-4, weight_decay=0.01, grad_clip=1.0, zero_stage=2, bf16=True,
                           micro_batch_size=4, accumulation_steps=4)
    assert cfg["zero_optimization"] == {"stage": 2}
    assert cfg["bf16"] == {"enabled": True}
    assert cfg["train_micro_batch_size_per_gpu"] == 4 and cfg["gradient_accumulation_steps"] == 4
    assert cfg["optimizer"]["type"] == "AdamW"
    assert cfg["optimizer"]["params"]["lr"] == 3e-4 and cfg["optimizer"]["params"]["weight_decay"] == 0.01
    assert cfg["gradient_clipping"] == 1.0


@pytest.mark.parametrize("key,value,msg", [("engine", "megatron", "engine must be"),
                                           ("rollout_engine", "sglang", "rollout_engine must be"),
                                           ("zero_stage", 4, "zero_stage must be")])
def test_train_config_rejects_unknown_engines(key, value, msg):
    with pytest.raises(ValueError, match=msg):
        train_config_from_dict("warmup", {"train": {key: value}}, where="kag.toml")


def _config(tmp_path, stage, **extra):
    train = {"model": "tiny", "environment": "copy-digit", "seed": 0, "actor_lr": 1e-3, "critic_lr": 1e-3,
             "episodes_per_step": 8, "mini_batch_size": 8, "micro_batch_size": 4, "max_new_tokens": 3,
             "steps": 2, "tensorboard": False, "engine": "deepspeed", "zero_stage": 2, "bf16": True,
             "output_dir": str(tmp_path / stage), **extra}
    return train_config_from_dict(stage, {"train": train, "environments": {"copy-digit": {"digits": "0123",
                                                                                       "digit_reward": 0.2}}})


def _rows(path):
    return [json.loads(r) for r in (path / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.deepspeed
@pytest.mark.skipif(NO_DEEPSPEED, reason="DeepSpeed is not installed")
def test_deepspeed_warmup_checkpoints_and_resumes(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    stage = plugins.create("algorithm", "warmup", config=_config(tmp_path, "warmup"), plugins=plugins)
    summary = stage.run()
    assert type(stage.actor_engine).__name__ == "DeepSpeedEngine"
    assert stage.actor_engine.engine.zero_optimization_stage() == 2
    assert summary["step"] == 2
    ckpt = tmp_path / "warmup" / "checkpoint"
    for role in ("actor", "critic"):
        assert (ckpt / role / "deepspeed" / "latest").read_text().strip() == "latest_step"
        assert (ckpt / role / "config.json").is_file()  # the HF copy for the next stage
    rows = _rows(tmp_path / "warmup")
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor_grad_norm"] > 0 and r["tokens_per_s"] > 0 for r in rows)

    # a rerun with more steps resumes at step 2 with DeepSpeed's optimizer state
    resumed = plugins.create("algorithm", "warmup", config=_config(tmp_path, "warmup", steps=3), plugins=plugins)
    resumed.setup()
    assert resumed.step == 2
    assert resumed.actor_engine.engine.global_steps > 0  # restored from the DeepSpeed checkpoint
    resumed.logger.close()
    summary = plugins.create("algorithm", "warmup", config=_config(tmp_path, "warmup", steps=3),
                             plugins=plugins).run()
    assert summary["step"] == 3
    assert [r["step"] for r in _rows(tmp_path / "warmup")] == [1, 2, 3]


@pytest.mark.deepspeed
@pytest.mark.skipif(NO_DEEPSPEED, reason="DeepSpeed is not installed")
def test_deepspeed_agentic_multi_turn(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    cfg = _config(tmp_path, "agentic", max_turns=2, env_options={"turns": 2})
    summary = plugins.create("algorithm", "agentic", config=cfg, plugins=plugins).run()
    assert summary["step"] == 2
    rows = _rows(tmp_path / "agentic")
    assert all(r["turns"] > 1 for r in rows)
    assert all(r["critic_grad_norm"] > 0 for r in rows)
