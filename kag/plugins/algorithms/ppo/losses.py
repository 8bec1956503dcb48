"""PPO losses: clipped policy loss (asymmetric + dual clip), clipped value loss, KL penalties,
truncated importance sampling, and token-level aggregation over the global batch.

Aggregation divides by the token (or sequence) count of the whole optimiser batch, passed in as
``total_tokens``/``total_seqs`` when a batch is split into micro-batches, so the gradient does not
depend on how the batch was split (verl's ``agg_loss``).
"""

from __future__ import annotations

import attrs
import torch

AGG_MODES = ("token-mean", "seq-mean-token-mean")
KL_TYPES = ("k1", "k3", "low_var_kl")


def agg_loss(
    loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token-mean",
    total_tokens: float | None = None,
    total_seqs: float | None = None,
) -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar.

    token-mean: sum over all unmasked tokens / the global token count.
    seq-mean-token-mean: each sequence's token mean, summed / the global sequence count
    (sequences without unmasked tokens count for nothing).
    """
    m = mask.to(loss.dtype)
    if mode == "token-mean":
        denom = float(total_tokens) if total_tokens is not None else m.sum().clamp(min=1.0)
        return (loss * m).sum() / denom
    if mode == "seq-mean-token-mean":
        tokens = m.sum(dim=-1)
        per_seq = (loss * m).sum(dim=-1) / tokens.clamp(min=1.0)
        has = (tokens > 0).to(loss.dtype)
        denom = float(total_seqs) if total_seqs is not None else has.sum().clamp(min=1.0)
        return (per_seq * has).sum() / denom
    raise ValueError(f"unknown loss aggregation {mode!r}; choose one of {', '.join(AGG_MODES)}")


@attrs.frozen
class PolicyLossOutput:
    loss: torch.Tensor
    clip_frac: float
    dual_clip_frac: float
    approx_kl: float


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    dual_clip_c: float | None = None,
    is_weights: torch.Tensor | None = None,
    agg: str = "token-mean",
    total_tokens: float | None = None,
    total_seqs: float | None = None,
    log_ratio_clamp: float = 20.0,
) -> PolicyLossOutput:
    """PPO clipped surrogate with clip range [1 - eps_low, 1 + eps_high] (clip-higher).

    Dual clip (c > 1) bounds the loss of negative-advantage tokens at -A*c, so a huge ratio on a
    bad token cannot dominate. ``is_weights`` (truncated IS, detached) multiply the per-token loss.
    """
    if dual_clip_c is not None and dual_clip_c <= 1.0:
        raise ValueError(f"dual_clip_c must be > 1 (typically 3), got {dual_clip_c}")
    log_ratio = torch.clamp(logp - old_logp, -log_ratio_clamp, log_ratio_clamp)
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    clipped = torch.maximum(loss1, loss2)
    m = mask.to(logp.dtype)
    clip_frac = ((loss2 > loss1).to(logp.dtype) * m).sum() / m.sum().clamp(min=1.0)
    dual_frac = torch.zeros((), dtype=logp.dtype)
    if dual_clip_c is not None:
        loss3 = -advantages * dual_clip_c
        dual = torch.minimum(loss3, clipped)
        is_dual = (advantages < 0) & (clipped > loss3)
        dual_frac = (is_dual.to(logp.dtype) * m).sum() / m.sum().clamp(min=1.0)
        clipped = torch.where(advantages < 0, dual, clipped)
    if is_weights is not None:
        clipped = clipped * is_weights.detach()
    loss = agg_loss(clipped, mask, agg, total_tokens, total_seqs)
    approx_kl = ((-log_ratio).detach() * m).sum() / m.sum().clamp(min=1.0)
    return PolicyLossOutput(loss, float(clip_frac), float(dual_frac), float(approx_kl))


@attrs.frozen
class ValueLossOutput:
    loss: torch.Tensor
    clip_frac: float


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float | None = 0.2,
    agg: str = "token-mean",
    total_tokens: float | None = None,
    total_seqs: float | None = None,
) -> ValueLossOutput:
    """0.5 * max((v - R)^2, (clip(v, v_old - eps, v_old + eps) - R)^2); plain MSE without clip."""
    unclipped = (values - returns) ** 2
    m = mask.to(values.dtype)
    if clip_eps is None:
        per_token, frac = unclipped, 0.0
    else:
        v_clip = old_values + torch.clamp(values - old_values, -clip_eps, clip_eps)
        clipped = (v_clip - returns) ** 2
        per_token = torch.maximum(unclipped, clipped)
        frac = float(((clipped > unclipped).to(values.dtype) * m).sum() / m.sum().clamp(min=1.0))
    return ValueLossOutput(0.5 * agg_loss(per_token, mask, agg, total_tokens, total_seqs), frac)


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Per-token KL estimate of the policy against the reference from sampled tokens.

    k1 = logp - ref_logp (unbiased, high variance); k3 = low_var_kl = exp(ref - logp) - (ref -
    logp) - 1 (always >= 0), clamped to [-10, 10] as verl does.
    """
    if kind == "k1":
        return logp - ref_logp
    if kind in ("k3", "low_var_kl"):
        d = ref_logp - logp
        return torch.clamp(torch.exp(d) - d - 1.0, -10.0, 10.0)
    raise ValueError(f"unknown KL estimator {kind!r}; choose one of {', '.join(KL_TYPES)}")


def truncated_is_weights(
    trainer_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor, cap: float = 2.0
) -> torch.Tensor:
    """min(pi_trainer / pi_rollout, cap) per token (detached); 1 at masked positions.

    Tokens are sampled by the rollout engine, whose numerics differ from the trainer's; this
    reweights the trainer's surrogate towards its own old policy (truncated IS).
    """
    w = torch.exp(torch.clamp(trainer_logp.detach() - rollout_logp.detach(), max=20.0)).clamp(max=cap)
    return torch.where(mask.bool(), w, torch.ones_like(w))


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-position entropy of the softmax over the vocabulary."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var(R - V) / Var(R) over masked tokens; nan when the returns do not vary."""
    m = mask.bool()
    r, v = returns[m].float(), values[m].float()
    if r.numel() < 2:
        return float("nan")
    var_r = r.var(unbiased=False)
    if var_r <= 1e-12:
        return float("nan")
    return float(1.0 - (r - v).var(unbiased=False) / var_r)
