"""The training knobs users expect: learning-rate warm-up and decay, adaptive KL, DeepSpeed config
pass-through, gradient checkpointing; each visible in metrics.jsonl and kept across a resume."""

import json
import math

import pytest
import torch

from kag.core.plugins import Plugins
from kag.plugins.algorithms.ppo.config import adaptive_kl, lr_factor, train_config_from_dict
from kag.plugins.algorithms.ppo.engine import TorchEngine, deepspeed_config, make_engine

COMMON = {"model": "tiny", "environment": "copy-digit", "actor_lr": 1e-3, "critic_lr": 1e-3,
          "episodes_per_step": 4, "mini_batch_size": 4, "micro_batch_size": 2, "max_new_tokens": 2,
          "steps": 4, "tensorboard": False}


def cfg(**over):
    return train_config_from_dict("warmup", {"train": {**COMMON, **over}})


def rows(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_learning_rate_warms_up_then_holds_or_follows_a_cosine():
    assert [lr_factor(cfg(), s, 4) for s in range(4)] == [1.0] * 4
    warm = cfg(lr_warmup_steps=3)
    assert [lr_factor(warm, s, 10) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    cos = cfg(lr_warmup_steps=1, lr_schedule="cosine", min_lr_ratio=0.1)
    got = [lr_factor(cos, s, 5) for s in range(5)]  # warm-up step, then 1.0 -> 0.1 over the last 4
    assert got[0] == 0.5 and got[1] == 1.0 and math.isclose(got[-1], 0.1)
    assert math.isclose(got[2], 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 3)))


def test_the_engine_uses_the_factor_and_a_resumed_run_continues_the_curve(tmp_path):
    model = torch.nn.Linear(2, 2)
    engine = TorchEngine(model, lr=0.5)
    engine.set_lr_factor(0.2)
    assert engine.optimizer.param_groups[0]["lr"] == pytest.approx(0.1)
    plugins = Plugins(load_entrypoints=False)
    opts = dict(output_dir=str(tmp_path / "w"), lr_warmup_steps=2, lr_schedule="cosine", steps=4)
    plugins.create("algorithm", "warmup", config=cfg(**{**opts, "steps": 2}), plugins=plugins).run()
    plugins.create("algorithm", "warmup", config=cfg(**opts), plugins=plugins).run()  # resumes at step 2
    got = [r["lr_factor"] for r in rows(tmp_path / "w")]
    want = [lr_factor(cfg(**opts), s, 4) for s in range(4)]
    # the first two steps were run as a 2-step stage, the resumed two follow the 4-step curve
    assert got[2:] == pytest.approx(want[2:]) and got[:2] == pytest.approx([1 / 3, 2 / 3])


def test_adaptive_kl_moves_towards_the_target_and_is_resumed(tmp_path):
    assert adaptive_kl(0.1, 0.2, 0.1, 100, 1000) == pytest.approx(0.1 * 1.02)  # 20% cap x 100/1000
    assert adaptive_kl(0.1, 0.05, 0.1, 100, 1000) == pytest.approx(0.1 * (1 - 0.2 * 0.1))  # -50%, capped
    plugins = Plugins(load_entrypoints=False)
    opts = dict(output_dir=str(tmp_path / "k"), kl_coef=0.5, kl_target=1e-6, kl_horizon=4, steps=2)
    plugins.create("algorithm", "warmup", config=cfg(**opts), plugins=plugins).run()
    first = rows(tmp_path / "k")
    # step 1: the actor is the reference (KL 0, below target): down by the full 20% x 4/4
    assert first[0]["kl_ref"] == 0.0 and first[0]["kl_coef"] == 0.5 and first[1]["kl_coef"] == pytest.approx(0.4)
    state = json.loads((tmp_path / "k" / "checkpoint" / "state.json").read_text())
    assert state["kl_coef"] == pytest.approx(adaptive_kl(first[1]["kl_coef"], first[1]["kl_ref"], 1e-6, 4, 4))
    plugins.create("algorithm", "warmup", config=cfg(**{**opts, "steps": 3}), plugins=plugins).run()
    assert rows(tmp_path / "k")[2]["kl_coef"] == pytest.approx(state["kl_coef"])


def test_config_errors_name_the_knob():
    with pytest.raises(ValueError, match="lr_schedule must be one of constant, cosine"):
        cfg(lr_schedule="linear")
    with pytest.raises(ValueError, match="kl_target needs kl_target > 0, a starting kl_coef > 0"):
        cfg(kl_target=0.1)
    with pytest.raises(ValueError, match="deepspeed_config is set but engine = \"torch\""):
        make_engine("torch", torch.nn.Linear(1, 1), 1e-3, 0.0, 1.0, extra_config={"zero_optimization": {}})


def test_deepspeed_config_may_not_set_what_kag_derives():
    with pytest.raises(ValueError, match="deepspeed_config sets zero_optimization.stage, which kag derives from zero_stage"):
        cfg(engine="deepspeed", deepspeed_config={"zero_optimization": {"stage": 3}})
    with pytest.raises(ValueError, match="sets train_micro_batch_size_per_gpu, which kag derives from micro_batch_size"):
        cfg(engine="deepspeed", deepspeed_config={"train_micro_batch_size_per_gpu": 4})
    ok = cfg(engine="deepspeed", deepspeed_config={"zero_optimization": {"offload_optimizer": {"device": "cpu"}}})
    assert ok.deepspeed_config["zero_optimization"]["offload_optimizer"]["device"] == "cpu"


def test_deepspeed_config_is_merged_key_by_key():
    offload = {"zero_optimization": {"offload_optimizer": {"device": "cpu", "pin_memory": True}},
               "gradient_clipping": 0.5}
    got = deepspeed_config(1e-6, 0.0, 1.0, 3, True, 2, 4, offload)
    assert got["zero_optimization"] == {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True}}
    assert got["gradient_clipping"] == 0.5 and got["optimizer"]["params"]["lr"] == 1e-6
    assert deepspeed_config(1e-6, 0.0, 1.0, 3, True)["zero_optimization"] == {"stage": 3}


def test_checkpointing_really_recomputes_on_a_model_read_from_disk(tmp_path):
    """A saved-and-loaded model starts in eval mode, where Hugging Face skips checkpointing: the
    autograd graph of a checkpointed forward must hold far fewer saved tensors."""
    from kag.plugins.algorithms.ppo.models import enable_checkpointing, load_actor, token_logprobs

    model, tok = load_actor("tiny", seed=0)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    ids = torch.randint(7, len(tok), (2, 24), generator=torch.Generator().manual_seed(0))

    def saved(m):
        count = [0]

        def pack(t):
            count[0] += 1
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            token_logprobs(m, ids, torch.ones_like(ids), chunk_tokens=0)[0].sum()
        return count[0]

    plain, _ = load_actor(str(tmp_path))
    assert not plain.training
    checkpointed, _ = load_actor(str(tmp_path))
    enable_checkpointing(checkpointed)
    assert saved(checkpointed) < saved(plain) / 2


def test_gradient_checkpointing_trains_the_same(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    out = {}
    for flag in (False, True):
        d = tmp_path / str(flag)
        plugins.create("algorithm", "warmup", config=cfg(output_dir=str(d), steps=2, gradient_checkpointing=flag),
                       plugins=plugins).run()
        out[flag] = rows(d)
    for key in ("reward_mean", "policy_loss", "value_loss"):
        assert [r[key] for r in out[False]] == pytest.approx([r[key] for r in out[True]], rel=1e-4, abs=1e-6), key
