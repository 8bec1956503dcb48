"""GAE over the model's own tokens only.

In a multi-turn trajectory the sequence interleaves model tokens (mask 1) with prompt and tool
output tokens (mask 0). Masked positions are skipped entirely: they add no gamma/lambda decay step
and carry the next model token's value and advantage through unchanged (verl's
``compute_gae_advantage_return`` with a response mask; OpenRLHF and slime decay across them, a
known bug). Advantages and returns are 0 at masked positions.
"""

from __future__ import annotations

from typing import Callable

import torch


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns, both (B, T), from token rewards, values and the model-token mask.

    ``rewards[b, t]`` is the reward received after token t (a trajectory's reward sits on its last
    model token; rewards on masked positions are ignored). ``values[b, t]`` is V of the state in
    which token t was chosen. Returns = advantages + values on model tokens.
    """
    if not (rewards.shape == values.shape == mask.shape):
        raise ValueError(f"rewards {tuple(rewards.shape)}, values {tuple(values.shape)} and mask "
                         f"{tuple(mask.shape)} must have the same (batch, tokens) shape")
    rewards, values = rewards.detach().float(), values.detach().float()
    m = mask.detach().float()
    batch, length = rewards.shape
    next_value = torch.zeros(batch, dtype=torch.float32, device=rewards.device)
    next_adv = torch.zeros_like(next_value)
    advantages = torch.zeros_like(rewards)
    for t in reversed(range(length)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        adv_t = delta + gamma * lam * next_adv
        # a masked step leaves the running value/advantage exactly as the next model token left it
        next_value = m[:, t] * values[:, t] + (1 - m[:, t]) * next_value
        next_adv = m[:, t] * adv_t + (1 - m[:, t]) * next_adv
        advantages[:, t] = adv_t * m[:, t]
    returns = (advantages + values) * m
    return advantages, returns


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp(min=1.0)


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    m = mask.to(x.dtype)
    n = m.sum()
    mean = (x * m).sum() / n.clamp(min=1.0)
    var = (((x - mean) ** 2) * m).sum() / n.clamp(min=1.0)
    if unbiased and n > 1:
        var = var * n / (n - 1)
    return var


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8,
                  all_sum: Callable[[list[float]], list[float]] | None = None) -> torch.Tensor:
    """(x - mean) / std over the masked tokens of the whole batch; 0 at masked positions.
    ``all_sum`` (kag.plugins.algorithms.ppo.ranks.all_sum) takes the statistics over every rank's
    part of the batch instead of this one's."""
    if all_sum is None:
        mean = masked_mean(x, mask)
        var = masked_var(x, mask)
    else:
        m = mask.to(x.dtype)  # two passes, as masked_var (one pass loses the spread under a large mean)
        total, n = all_sum([float((x.double() * m).sum()), float(m.sum())])
        mean_f = total / max(n, 1.0)
        (squares,) = all_sum([float((((x.double() - mean_f) ** 2) * m).sum())])
        var_f = squares / max(n, 1.0) * (n / (n - 1) if n > 1 else 1.0)
        mean, var = torch.tensor(mean_f, dtype=x.dtype), torch.tensor(var_f, dtype=x.dtype)
    return (x - mean) * torch.rsqrt(var + eps) * mask.to(x.dtype)
