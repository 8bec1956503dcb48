"""Micro-batches by a token budget (verl's dynamic batch size): every row once, no micro-batch over its
budget but a lone long row, and the same gradient as micro-batches by count, since every loss is
normalised by its whole mini-batch's token count."""

import torch

from kag.plugins.algorithms.ppo.losses import agg_loss
from kag.plugins.algorithms.ppo.models import token_logprobs
from kag.plugins.algorithms.ppo.ppo_stage import _sub, micro_batches
from kag.plugins.algorithms.ppo.tiny import make_tiny
from tests.plugins.algorithms.warmup_runs import assert_same_training, warmup_runs


def test_a_token_budget_packs_rows_longest_first_each_once():
    lengths = torch.tensor([5, 40, 12, 33, 8, 90, 20])
    idx = torch.tensor([6, 0, 3, 5, 1, 4, 2])
    groups = micro_batches(idx, lengths, size=2, max_tokens=80)
    assert sorted(torch.cat(groups).tolist()) == sorted(idx.tolist())
    for g in groups:
        widest = int(lengths[g].max())
        assert len(g) == 1 or widest * len(g) <= 80  # a 90-token row goes alone
    assert [len(g) for g in micro_batches(idx, lengths, size=3)] == [3, 3, 1]  # by count when no budget


def _grads(model, batch, groups, tokens):
    model.zero_grad()
    for idx in groups:
        sub = _sub(batch, idx)
        logp, _ = token_logprobs(model, sub["input_ids"], sub["attention_mask"], 1.0)
        agg_loss(-logp, sub["mask"], "token-mean", tokens, float(len(batch["mask"]))).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_micro_batches_by_tokens_give_the_gradient_of_micro_batches_by_count():
    model, tok = make_tiny(seed=5)
    gen = torch.Generator().manual_seed(1)
    lengths = torch.tensor([30, 9, 22, 14, 30, 6])
    width = int(lengths.max())
    ids = torch.randint(7, len(tok), (6, width), generator=gen)
    attn = (torch.arange(width).expand(6, width) < lengths[:, None]).long()  # right padding, as collate pads
    mask = attn[:, 1:].float()
    batch = {"input_ids": ids * attn, "attention_mask": attn, "mask": mask}
    tokens = float(mask.sum())
    rows = torch.arange(6)
    by_count = _grads(model, batch, micro_batches(rows, attn.sum(-1), size=2), tokens)
    packed = micro_batches(rows, attn.sum(-1), size=2, max_tokens=45)
    assert len(packed) != 3  # a different split
    by_tokens = _grads(model, batch, packed, tokens)
    assert by_count.keys() == by_tokens.keys() and len(by_count) > 5
    for name, g in by_count.items():
        assert torch.allclose(g, by_tokens[name], atol=1e-5, rtol=1e-4), name


def test_a_negative_token_budget_is_refused_naming_the_key():
    import pytest

    from kag.plugins.algorithms.ppo.config import TrainConfig

    with pytest.raises(ValueError, match="micro_batch_tokens must be >= 0"):
        TrainConfig(micro_batch_tokens=-1).validate()
    assert TrainConfig(micro_batch_tokens=4096).validate().micro_batch_tokens == 4096


def test_a_warmup_run_by_a_token_budget_trains_as_one_by_count(tmp_path):
    """Two steps of the warm-up stage, same seed: micro-batches by a token budget (here one episode
    each) and by count give the same losses and gradient norms, step for step."""
    rows, _ = warmup_runs(tmp_path, {"count": {}, "tokens": {"micro_batch_tokens": 14}})
    assert_same_training(rows["count"], rows["tokens"])
