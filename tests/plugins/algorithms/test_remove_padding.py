"""Padding removal: a micro-batch's rows run through the model packed into one row (position ids
restarting on each row), no padding token in any layer; log-probs, entropy, values and gradients
are those of the padded rows, and the model sees the sum of the rows' lengths in tokens."""

import pytest
import torch

from kag.plugins.algorithms.ppo.models import Packed, critic_from_actor, token_logprobs, token_values
from kag.plugins.algorithms.ppo.ppo_stage import micro_batches
from kag.plugins.algorithms.ppo.tiny import make_tiny
from tests.plugins.algorithms.warmup_runs import assert_same_training, warmup_runs

LENGTHS = torch.tensor([30, 9, 22, 2, 14])


def _rows(tok, left=False):
    width = int(LENGTHS.max())
    ids = torch.randint(7, len(tok), (len(LENGTHS), width), generator=torch.Generator().manual_seed(0))
    attn = (torch.arange(width).expand(len(LENGTHS), width) < LENGTHS[:, None]).long()  # right padding (collate)
    if left:
        attn = attn.flip(-1)
    return ids * attn, attn


class TokensSeen:
    """The token positions the model's embedding layer is called on."""

    def __init__(self, model):
        self.count = 0
        model.get_input_embeddings().register_forward_pre_hook(self)

    def __call__(self, module, args):
        self.count += args[0].numel()


def _run(model, critic, ids, attn, remove_padding, chunk):
    model.zero_grad()
    critic.zero_grad()
    logp, ent = token_logprobs(model, ids, attn, 0.8, with_entropy=True, entropy_grad=True, chunk_tokens=chunk,
                               remove_padding=remove_padding)
    values = token_values(critic, ids, attn, remove_padding)
    valid = (attn[:, :-1] * attn[:, 1:]).float()
    ((logp * valid).sum() + (ent * valid).sum() + ((values * valid) ** 2).sum()).backward()
    grads = {n: p.grad.clone() for n, p in [*model.named_parameters(), *critic.named_parameters()]
             if p.grad is not None}
    return logp.detach(), ent.detach(), values.detach(), grads


@pytest.mark.parametrize("family,chunk,left", [("llama", 0, False), ("llama", 7, False), ("qwen2", 7, False),
                                               ("llama", 7, True)])
def test_packed_rows_give_the_padded_rows_numbers_and_gradients(family, chunk, left):
    model, tok = make_tiny(seed=4, family=family)
    critic = critic_from_actor(model)
    torch.nn.init.normal_(critic.value_head.weight, std=0.1)  # a zero head would hide the critic's gradients
    ids, attn = _rows(tok, left)
    valid = (attn[:, :-1] * attn[:, 1:]).bool()
    seen_actor, seen_critic = TokensSeen(model), TokensSeen(critic.backbone)
    padded = _run(model, critic, ids, attn, False, chunk)
    assert seen_actor.count == seen_critic.count == attn.numel()  # 5 x 30 = 150
    seen_actor.count = seen_critic.count = 0
    packed = _run(model, critic, ids, attn, True, chunk)
    assert seen_actor.count == seen_critic.count == int(LENGTHS.sum())  # 77: no padding token through the model
    real = attn[:, :-1].bool()  # a value exists at every real token; a log-prob where the next is real too
    for a, b, where in zip(padded[:3], packed[:3], (valid, valid, real)):
        assert torch.allclose(a[where], b[where], atol=1e-5)
        assert (b[~where] == 0).all()  # padding's positions hold 0
    assert padded[3].keys() == packed[3].keys() and len(padded[3]) > 10
    for name, g in padded[3].items():
        assert (g - packed[3][name]).norm() <= 1e-5 * g.norm() + 1e-7, name


def test_the_comparison_sees_rows_that_attend_to_each_other():
    """Control: the same packed row run with one plain causal mask over it (rows see the rows before
    them) gives other log-probs, so the equality above is the position ids' doing."""
    model, tok = make_tiny(seed=4)
    ids, attn = _rows(tok)
    packed = Packed.of(ids, attn, model)
    leaky = model(input_ids=packed.input_ids, attention_mask=torch.ones_like(packed.input_ids),
                  position_ids=packed.position_ids, use_cache=False).logits.log_softmax(-1)[0]
    leaky_logp = packed.unpack_next(leaky.gather(-1, packed.next_tokens()[:, None])[:, 0])
    exact, _ = token_logprobs(model, ids, attn, 1.0, chunk_tokens=0)
    valid = (attn[:, :-1] * attn[:, 1:]).bool()
    assert torch.allclose(leaky_logp[0][valid[0]], exact[0][valid[0]], atol=1e-5)  # the first row sees no other
    assert (leaky_logp[1:] - exact[1:])[valid[1:]].abs().max() > 1e-2


def test_a_token_budget_counts_real_tokens_when_padding_is_removed():
    idx = torch.arange(len(LENGTHS))
    by_padded = micro_batches(idx, LENGTHS, size=2, max_tokens=40)
    by_real = micro_batches(idx, LENGTHS, size=2, max_tokens=40, padded=False)
    assert [g.tolist() for g in by_padded] == [[0], [2], [4, 1], [3]]  # 30 | 22 | 14 x 2 (+9 would be 14 x 3 = 42)
    assert [g.tolist() for g in by_real] == [[0], [2, 4], [1, 3]]  # 30 | 22 + 14 | 9 + 2: fewer micro-batches
    for g in by_real:
        assert len(g) == 1 or int(LENGTHS[g].sum()) <= 40


def test_remove_padding_is_refused_for_an_unknown_model_type_and_a_bad_value():
    from kag.plugins.algorithms.ppo.config import TrainConfig

    with pytest.raises(ValueError, match="remove_padding must be true or false"):
        TrainConfig(remove_padding="yes").validate()
    model, tok = make_tiny()
    ids, attn = _rows(tok)
    model.config.model_type = "gpt2"
    with pytest.raises(ValueError, match="remove_padding: model type 'gpt2'"):
        token_logprobs(model, ids, attn, remove_padding=True)


def test_a_warmup_run_without_padding_trains_as_one_with_it(tmp_path):
    """Two steps of the warm-up stage, same seed, a mini-batch of four episodes in one micro-batch: with
    and without padding removal the losses and gradient norms agree, step for step."""
    rows, _ = warmup_runs(tmp_path, {"padded": {}, "packed": {"remove_padding": True}}, micro_batch_size=4,
                          max_new_tokens=4)
    assert_same_training(rows["padded"], rows["packed"])
