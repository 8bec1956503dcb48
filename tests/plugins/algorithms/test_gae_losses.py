"""GAE and PPO losses against numbers worked out by hand (the arithmetic is in the comments)."""

import math

import pytest
import torch

from kag.plugins.algorithms.ppo.gae import compute_gae, masked_whiten
from kag.plugins.algorithms.ppo.losses import (
    agg_loss,
    entropy_from_logits,
    explained_variance,
    kl_penalty,
    policy_loss,
    truncated_is_weights,
    value_loss,
)


def t(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_gae_single_turn_by_hand():
    # gamma=1, lam=0.95, rewards [0,0,1], values [.5,.6,.7]
    # t=2: delta = 1 - .7 = .3                       adv = .3
    # t=1: delta = 0 + .7 - .6 = .1                  adv = .1 + .95*.3 = .385
    # t=0: delta = 0 + .6 - .5 = .1                  adv = .1 + .95*.385 = .46575
    adv, ret = compute_gae(t([0, 0, 1]), t([0.5, 0.6, 0.7]), t([1, 1, 1]), gamma=1.0, lam=0.95)
    assert adv.tolist()[0] == pytest.approx([0.46575, 0.385, 0.3])
    assert ret.tolist()[0] == pytest.approx([0.96575, 0.985, 1.0])


def test_gae_multi_turn_masked_tool_tokens_add_no_decay():
    # model token, two tool-output tokens (mask 0, garbage values 9), model token with reward 1.
    # gamma=.9, lam=.95. t=3: adv = 1 - .7 = .3. t=2,1: skipped, adv 0.
    # t=0: delta = 0 + .9*.7 - .5 = .13; adv = .13 + .9*.95*.3 = .13 + .2565 = .3865
    rewards, values, mask = t([0, 0, 0, 1]), t([0.5, 9.0, 9.0, 0.7]), t([1, 0, 0, 1])
    adv, ret = compute_gae(rewards, values, mask, gamma=0.9, lam=0.95)
    assert adv.tolist()[0] == pytest.approx([0.3865, 0.0, 0.0, 0.3])
    assert ret.tolist()[0] == pytest.approx([0.3865 + 0.5, 0.0, 0.0, 1.0])
    # identical to the same two model tokens with the tool tokens cut out
    adv2, _ = compute_gae(t([0, 1]), t([0.5, 0.7]), t([1, 1]), gamma=0.9, lam=0.95)
    assert adv2.tolist()[0] == pytest.approx([0.3865, 0.3])
    # a naive GAE that steps through the tool tokens would give a different number:
    naive = 0.0
    nv = 0.0
    for r, v in reversed(list(zip([0, 0, 0, 1], [0.5, 9.0, 9.0, 0.7]))):
        naive = r + 0.9 * nv - v + 0.9 * 0.95 * naive
        nv = v
    assert abs(naive - 0.3865) > 0.1


def test_gae_per_turn_rewards_and_prompt_padding():
    # two sequences; seq 0 starts with 2 prompt tokens; seq 1 has a reward on each turn.
    # seq0 mask [0,0,1,1] rewards [0,0,0,2] values [0,0,1,1], gamma 1 lam .5:
    #   t3: 2-1 = 1; t2: 0+1-1 + .5*1 = .5
    # seq1 mask [1,0,1,0] rewards [1,0,1,0] values [.5,0,.5,0]:
    #   t2: 1 - .5 = .5; t0: 1 + .5 - .5 + .5*.5 = 1.25
    rewards = t([0, 0, 0, 2], [1, 0, 1, 0])
    values = t([0, 0, 1, 1], [0.5, 0, 0.5, 0])
    mask = t([0, 0, 1, 1], [1, 0, 1, 0])
    adv, ret = compute_gae(rewards, values, mask, gamma=1.0, lam=0.5)
    assert adv.tolist() == [pytest.approx([0, 0, 0.5, 1.0]), pytest.approx([1.25, 0, 0.5, 0])]
    assert ret.tolist() == [pytest.approx([0, 0, 1.5, 2.0]), pytest.approx([1.75, 0, 1.0, 0])]


def test_masked_whiten():
    # [1,2,3] unmasked, 100 masked: mean 2, unbiased var (1+0+1)/2 = 1 -> [-1, 0, 1], 0
    out = masked_whiten(t([1, 2, 3, 100]), t([1, 1, 1, 0]))
    assert out.tolist()[0] == pytest.approx([-1, 0, 1, 0], abs=1e-6)


LOG_RATIOS = [math.log(1.5), math.log(0.5), math.log(1.1), math.log(4.0)]
ADV = [1.0, -1.0, 2.0, -1.0]
# per token (eps_low .2, eps_high .28):
#   r=1.5 A=1 : max(-1.5, -1.28) = -1.28 (clipped)
#   r=0.5 A=-1: max(0.5, 0.8)    =  0.8  (clipped)
#   r=1.1 A=2 : max(-2.2, -2.2)  = -2.2
#   r=4   A=-1: max(4, 1.28)     =  4    ; dual clip c=3: min(3, 4) = 3


def _pl(mask=(1, 1, 1, 1), **kw):
    logp = torch.tensor([LOG_RATIOS])
    return policy_loss(logp, torch.zeros_like(logp), torch.tensor([ADV]), t(list(mask)), **kw)


def test_policy_loss_asymmetric_clip_by_hand():
    out = _pl()
    assert float(out.loss) == pytest.approx((-1.28 + 0.8 - 2.2 + 4.0) / 4)  # 0.33
    assert out.clip_frac == pytest.approx(0.5)
    masked = _pl(mask=(1, 1, 1, 0))
    assert float(masked.loss) == pytest.approx((-1.28 + 0.8 - 2.2) / 3)


def test_policy_loss_dual_clip_and_is_weights():
    out = _pl(dual_clip_c=3.0)
    assert float(out.loss) == pytest.approx((-1.28 + 0.8 - 2.2 + 3.0) / 4)  # 0.08
    assert out.dual_clip_frac == pytest.approx(0.25)
    w = _pl(is_weights=torch.tensor([[2.0, 1.0, 1.0, 1.0]]))
    assert float(w.loss) == pytest.approx((-2.56 + 0.8 - 2.2 + 4.0) / 4)  # 0.01
    with pytest.raises(ValueError, match="dual_clip_c"):
        _pl(dual_clip_c=0.5)


def test_log_ratio_clamp():
    out = policy_loss(t([100.0]), t([0.0]), t([-1.0]), t([1.0]), eps_low=0.2, eps_high=0.28)
    assert float(out.loss) == pytest.approx(math.exp(20.0), rel=1e-4)  # ratio exp(20), not exp(100)


def test_agg_modes_by_hand():
    loss = t([-1.28, 0.8], [-2.2, 4.0])
    mask = t([1, 1], [1, 0])
    assert float(agg_loss(loss, mask, "token-mean")) == pytest.approx((-1.28 + 0.8 - 2.2) / 3)
    # per-sequence means -0.24 and -2.2, averaged: -1.22
    assert float(agg_loss(loss, mask, "seq-mean-token-mean")) == pytest.approx(-1.22)
    with pytest.raises(ValueError, match="token-mean"):
        agg_loss(loss, mask, "sum")


def test_micro_batches_with_global_token_count_match_full_batch_gradient():
    torch.manual_seed(0)
    logits = torch.randn(4, 6, requires_grad=True)
    adv, old = torch.randn(4, 6), torch.randn(4, 6) * 0.1
    mask = (torch.rand(4, 6) > 0.3).float()
    full = policy_loss(logits, old, adv, mask).loss
    (g_full,) = torch.autograd.grad(full, logits)
    n = float(mask.sum())
    total = sum(policy_loss(logits[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2],
                            total_tokens=n).loss for i in (0, 2))
    (g_micro,) = torch.autograd.grad(total, logits)
    assert torch.allclose(g_full, g_micro, atol=1e-6)


def test_value_loss_clipped_by_hand():
    # tok0: v 1.0 old .5 R 1.2: (1-1.2)^2=.04, clipped v .7: (.7-1.2)^2=.25 -> .25
    # tok1: v 0.0 old .5 R -1 : 1.0, clipped v .3: 1.69 -> 1.69
    # tok2: v .6 old .5 R 0   : .36 both -> .36      loss = .5 * (.25+1.69+.36)/3
    out = value_loss(t([1.0, 0.0, 0.6]), t([0.5, 0.5, 0.5]), t([1.2, -1.0, 0.0]), t([1, 1, 1]), clip_eps=0.2)
    assert float(out.loss) == pytest.approx(0.5 * 2.3 / 3)
    assert out.clip_frac == pytest.approx(2 / 3)
    plain = value_loss(t([1.0, 0.0, 0.6]), t([0.5, 0.5, 0.5]), t([1.2, -1.0, 0.0]), t([1, 1, 1]), clip_eps=None)
    assert float(plain.loss) == pytest.approx(0.5 * (0.04 + 1.0 + 0.36) / 3)


def test_kl_estimators_by_hand():
    logp, ref = t([math.log(0.5)]), t([math.log(0.25)])
    assert float(kl_penalty(logp, ref, "k1")) == pytest.approx(math.log(2))  # .693147
    # k3: d = ln .25 - ln .5 = -ln 2; e^d - d - 1 = .5 + .693147 - 1 = .193147
    assert float(kl_penalty(logp, ref, "low_var_kl")) == pytest.approx(0.5 + math.log(2) - 1)
    assert float(kl_penalty(logp, logp, "k3")) == 0.0
    with pytest.raises(ValueError, match="k1"):
        kl_penalty(logp, ref, "k9")


def test_truncated_is_weights():
    trainer = t([math.log(0.3), math.log(0.2), math.log(0.9)])
    rollout = t([math.log(0.1), math.log(0.4), math.log(0.1)])
    w = truncated_is_weights(trainer, rollout, t([1, 1, 0]), cap=2.0)
    assert w.tolist()[0] == pytest.approx([2.0, 0.5, 1.0])  # 3 capped at 2; .5; masked -> 1


def test_entropy_and_explained_variance():
    uniform = torch.zeros(1, 1, 4)
    assert float(entropy_from_logits(uniform)) == pytest.approx(math.log(4))
    # R [1,2,3], V [1,2,2]: Var(R-V) = 2/9, Var(R) = 2/3 -> 1 - 1/3
    assert explained_variance(t([1, 2, 2]), t([1, 2, 3]), t([1, 1, 1])) == pytest.approx(2 / 3)
    assert math.isnan(explained_variance(t([1, 2]), t([1, 1]), t([1, 1])))
