"""bf16 weights on the torch engine (``dtype = "bfloat16"``): fp32 master weights and Adam state,
gradients accumulated in fp32, log-probs in fp32 from bf16 logits, the masters in checkpoints."""

import pytest
import torch

from kag.plugins.algorithms.ppo.engine import TorchEngine
from kag.plugins.algorithms.ppo.models import token_logprobs
from kag.plugins.algorithms.ppo.tiny import make_tiny
from tests.plugins.algorithms.warmup_runs import warmup_runs


def test_updates_below_bf16_spacing_accumulate_in_the_fp32_masters():
    """lr 1e-6 against weights of 1.0 (bf16 spacing there: 2^-7): the masters move 1e-6 a step,
    the bf16 weights are the masters rounded; Adam on the bf16 weights themselves would not move."""
    model = torch.nn.Linear(4, 1, bias=False).to(torch.bfloat16)
    torch.nn.init.ones_(model.weight)
    engine = TorchEngine(model, lr=1e-6)
    assert engine.master[0].dtype == torch.float32 and engine.optimizer.param_groups[0]["params"][0].dtype == torch.float32
    x = torch.ones(2, 4, dtype=torch.bfloat16)
    for _ in range(5):
        engine.backward(model(x).float().sum())
        engine.step()
    assert torch.allclose(engine.master[0], torch.full((1, 4), 1 - 5e-6), atol=1e-7)
    assert (model.weight == 1.0).all() and model.weight.dtype == torch.bfloat16  # rounded: 1 - 5e-6 is 1 in bf16
    pure = torch.nn.Linear(4, 1, bias=False).to(torch.bfloat16)
    torch.nn.init.ones_(pure.weight)
    opt = torch.optim.AdamW(pure.parameters(), lr=1e-6)
    for _ in range(5):
        pure(x).float().sum().backward()
        opt.step()
    assert (pure.weight == 1.0).all()  # the same five updates, every one rounded away


def test_micro_batch_gradients_add_up_in_fp32():
    model = torch.nn.Linear(3, 1, bias=False).to(torch.bfloat16)
    engine = TorchEngine(model, lr=0.0)
    x = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.bfloat16)
    for scale in (1.0, 1e-3, 1e-3):  # bf16 has 8 bits: 1 + 1e-3 would round to 1
        engine.backward(model(x).float().sum() * scale)
        assert model.weight.grad is None  # handed to the master at once
    assert torch.allclose(engine.master[0].grad, torch.tensor([[1.0, 2.0, 3.0]]) * 1.002, rtol=1e-5)
    one = torch.tensor(1.0, dtype=torch.bfloat16)
    assert one + 1e-3 + 1e-3 == one  # what accumulating in the bf16 .grad would have kept


def test_the_masters_are_saved_and_resumed(tmp_path):
    model, _ = make_tiny(seed=1)
    model.to(torch.bfloat16)
    engine = TorchEngine(model, lr=1e-3)
    ids = torch.randint(7, 40, (2, 9), generator=torch.Generator().manual_seed(0))
    logp, _ = token_logprobs(model, ids, torch.ones_like(ids))
    engine.backward(-logp.mean())
    engine.step()
    engine.save(tmp_path)
    again, _ = make_tiny(seed=2)  # other weights: all of them come from the checkpoint
    again.to(torch.bfloat16)
    resumed = TorchEngine(again, lr=1e-3)
    resumed.load_optimizer(tmp_path)
    for a, b in zip(engine.master, resumed.master):
        assert torch.equal(a, b)
    for a, b in zip(model.parameters(), again.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("chunk", [0, 5])
def test_bf16_log_probs_are_fp32_and_near_the_fp32_models(chunk):
    model, tok = make_tiny(seed=3)
    ids = torch.randint(7, len(tok), (3, 20), generator=torch.Generator().manual_seed(0))
    attn = torch.ones_like(ids)
    full, _ = token_logprobs(model, ids, attn, chunk_tokens=chunk)
    model.to(torch.bfloat16)
    half, ent = token_logprobs(model, ids, attn, with_entropy=True, chunk_tokens=chunk)
    assert half.dtype == ent.dtype == torch.float32
    assert (half - full).abs().max() < 0.05


def test_a_bf16_warmup_run_trains_near_the_fp32_one(tmp_path):
    """Two warm-up steps, same seed: actor and critic in bf16 with fp32 masters; the same rewards and
    losses within bf16's precision (measured: 1e-4 to 3e-4 apart)."""
    rows, stages = warmup_runs(tmp_path, {"fp32": {}, "bf16": {"dtype": "bfloat16"}}, episodes_per_step=8,
                               environments={"copy-digit": {"digits": "0123", "digit_reward": 0.2}})
    for name, stage in stages.items():
        low = name == "bf16"
        assert {p.dtype for p in [*stage.actor.parameters(), *stage.critic.parameters()]} == {
            torch.bfloat16 if low else torch.float32}
        assert (stage.actor_engine.master is not None) == low == (stage.out / "checkpoint" / "actor" /
                                                                  TorchEngine.MASTER_FILE).is_file()
    assert any(r["policy_loss"] for r in rows["fp32"])  # a learning signal to compare
    for a, b in zip(rows["fp32"], rows["bf16"]):
        assert a["reward_mean"] == b["reward_mean"]
        for key in ("policy_loss", "value_loss"):
            assert abs(a[key] - b[key]) <= 2e-3, (key, a[key], b[key])
        for key in ("actor_grad_norm", "critic_grad_norm"):
            assert abs(a[key] - b[key]) <= 0.02 * a[key], (key, a[key], b[key])


def test_a_bad_dtype_is_refused_naming_the_key():
    from kag.plugins.algorithms.ppo.config import TrainConfig

    with pytest.raises(ValueError, match="dtype must be one of float32, bfloat16"):
        TrainConfig(dtype="float16").validate()
    with pytest.raises(ValueError, match="dtype = 'bfloat16' is the torch engine's"):
        TrainConfig(dtype="bfloat16", engine="deepspeed").validate()
    assert TrainConfig(dtype="bfloat16").validate().dtype == "bfloat16"
