"""Data-parallel ranks (kag.plugins.algorithms.ppo.ranks): N ranks under a launcher take the step
one rank takes on the same episodes, and a stage that cannot split says so before it starts.

The launcher tests start real ranks with ``torch.distributed.run`` (gloo on the CPU, DeepSpeed
ZeRO-3); bench/scripts/gpu_x2_ranks.sh runs the same on two GPUs with NCCL.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kag.core.plugins import Plugins
from kag.plugins.algorithms.ppo import ranks
from kag.plugins.algorithms.ppo.config import train_config_from_dict

NO_DEEPSPEED = importlib.util.find_spec("deepspeed") is None
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def test_without_a_launcher_every_helper_is_the_identity(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert ranks.world() == 1 and ranks.is_main()
    assert ranks.shard([1, 2, 3]) == [1, 2, 3]
    assert ranks.all_sum([1.5, 2.0]) == [1.5, 2.0]
    assert ranks.combine_metrics({"a": 1.0}) == {"a": 1.0}
    assert ranks.any_rank(False) is False


def test_shard_takes_every_nth_item_from_this_ranks_place(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "1")
    assert ranks.shard(list(range(8))) == [1, 4, 7]


def _config(tmp_path, stage="warmup", **extra):
    train = {"model": "tiny", "environment": "copy-digit", "seed": 0, "episodes_per_step": 8,
             "mini_batch_size": 8, "micro_batch_size": 4, "max_new_tokens": 3, "steps": 2, "tensorboard": False,
             "engine": "deepspeed", "zero_stage": 3, "bf16": False, "device": "cpu",
             "output_dir": str(tmp_path / stage), **extra}
    return train_config_from_dict(stage, {"train": train, "environments": {"copy-digit": {"digits": "0123"}}})


@pytest.mark.parametrize("stage,extra,message", [
    ("rft", {"data": "x.jsonl"}, "runs in one process"),
    ("value-pretrain", {"data": "x.jsonl"}, "runs in one process"),
    ("warmup", {"engine": "torch"}, "needs engine = \"deepspeed\""),
    ("warmup", {"rollout_engine": "vllm"}, "rollout_engine = \"hf\""),
    ("warmup", {"episodes_per_step": 9}, "episodes_per_step = 9 does not split over 2 ranks"),
    ("agentic", {"mini_batch_size": 3}, "mini_batch_size = 3 does not split over 2 ranks"),
])
def test_a_stage_that_cannot_split_over_ranks_says_so_before_it_starts(tmp_path, monkeypatch, stage, extra, message):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    plugins = Plugins(load_entrypoints=False)
    s = plugins.create("algorithm", stage, config=_config(tmp_path, stage, **extra), plugins=plugins)
    with pytest.raises(ValueError, match=message):
        s.setup()
    assert not (tmp_path / stage).exists()  # refused before anything was written


def _launch(nproc: int, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    cmd = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
           if nproc > 1 else [sys.executable])
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)


@pytest.mark.deepspeed
@pytest.mark.slow
@pytest.mark.skipif(NO_DEEPSPEED, reason="DeepSpeed is not installed")
def test_two_ranks_take_the_step_one_rank_takes_on_the_same_episodes(tmp_path):
    for n in (1, 2):
        proc = _launch(n, str(HERE / "ranks_step.py"), str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = (json.loads((tmp_path / f"metrics-{n}.json").read_text()) for n in (1, 2))
    # the advantages were whitened over the whole batch, not per rank
    assert two["advantage_sum_sq"] == pytest.approx(one["advantage_sum_sq"], rel=1e-4)
    # losses normalised by the whole mini-batch's tokens: the same loss and the same gradient
    for key in ("policy_loss", "value_loss", "actor_grad_norm", "critic_grad_norm"):
        assert two[key] == pytest.approx(one[key], rel=1e-4, abs=1e-7), key
    import torch

    a, b = (torch.load(tmp_path / f"actor-{n}.pt") for n in (1, 2))
    assert a.keys() == b.keys()
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst < 1e-5, f"parameters after the step differ by {worst}"


def _train(nproc: int, config: Path, *sets: str) -> subprocess.CompletedProcess:
    args = ["-m", "kag.cli.main"] if nproc == 1 else ["--no-python", sys.executable, "-m", "kag.cli.main"]
    return _launch(nproc, *args, "train", "warmup", "--config", str(config), *[f"--set={s}" for s in sets])


@pytest.mark.deepspeed
@pytest.mark.slow
@pytest.mark.skipif(NO_DEEPSPEED, reason="DeepSpeed is not installed")
def test_kag_train_warmup_on_two_ranks_logs_once_checkpoints_every_shard_and_resumes(tmp_path):
    out = tmp_path / "warmup"
    config = tmp_path / "kag.toml"
    config.write_text(f"""
[train]
model = "tiny"
environment = "copy-digit"
device = "cpu"
engine = "deepspeed"
zero_stage = 3
bf16 = false
episodes_per_step = 8
mini_batch_size = 8
micro_batch_size = 4
max_new_tokens = 3
tensorboard = false
output_dir = "{out}"

[environments.copy-digit]
digits = "0123"
""")
    proc = _train(2, config, "steps=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(r) for r in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]  # one row per step, written by rank 0 alone
    assert all(r["episodes"] == 8 for r in rows)  # 4 on each rank
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 2 and len(state["torch_generators"]) == 2
    shards = list((out / "checkpoint" / "actor" / "deepspeed" / "latest_step").glob("*optim_states.pt"))
    assert len(shards) == 2, shards  # ZeRO-3: one optimizer shard per rank
    assert (out / "checkpoint" / "actor" / "config.json").is_file()  # the gathered HF copy, for the next stage

    proc = _train(2, config, "steps=3")  # resumes at step 2 on the same two ranks
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [json.loads(r)["step"] for r in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]

    (out / "checkpoint").rename(out / "checkpoint.old")  # killed between save_checkpoint's two renames
    proc = _train(2, config, "steps=4")  # rank 0 puts it back before any rank looks for it
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [json.loads(r)["step"] for r in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]

    proc = _train(1, config, "steps=5")  # one rank cannot take over two ranks' generators and shards
    assert proc.returncode == 2
    assert "written by 2 rank(s)" in proc.stderr


def test_whitening_over_ranks_keeps_the_spread_under_a_large_mean():
    import torch

    from kag.plugins.algorithms.ppo.gae import masked_whiten

    g = torch.Generator().manual_seed(0)
    x = 10.0 + 0.01 * torch.randn(64, 1024, generator=g)
    mask = (torch.rand(64, 1024, generator=g) > 0.2).float()
    one = masked_whiten(x, mask)
    split = masked_whiten(x, mask, all_sum=lambda values: list(values))  # one rank's sums are the totals
    assert float((one - split).abs().max()) < 1e-3


def test_the_recipe_refuses_to_run_on_several_ranks(tmp_path, monkeypatch):
    from kag.plugins.algorithms.ppo.recipe import run_recipe

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="runs in one process"):
        run_recipe({"train": {"model": "tiny"}}, "kag.toml", Plugins(load_entrypoints=False), print, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
