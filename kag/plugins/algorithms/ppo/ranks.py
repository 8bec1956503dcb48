"""Data-parallel ranks for the PPO stages, under a launcher (``deepspeed``, ``torchrun``).

Trainer side (no trust boundary here: the ranks are the trainer's own processes).

Each rank runs the whole stage: it draws the step's task list from the same seeded RNG as every
other rank, plays its own slice of it (``shard``), normalises its losses by the token count of
the global mini-batch, and DeepSpeed averages the gradients, so N ranks take the step one rank
would take on the same episodes. Rank 0 alone writes metrics and the checkpoint's state and
Hugging Face copy; DeepSpeed's own checkpoint is written by every rank (one shard each), so the
output folder must be one every rank sees (one node, or a shared file system).

Without a launcher (``WORLD_SIZE`` unset or 1) every function here is the identity.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

SUMMED = ("tokens_per_s", "episodes")  # metrics of the whole step: summed over ranks, the rest averaged


def world() -> int:
    return int(os.environ.get("WORLD_SIZE") or 1)


def rank() -> int:
    return int(os.environ.get("RANK") or 0)


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK") or 0)


def is_main() -> bool:
    return rank() == 0


def _dist() -> Any | None:
    """torch.distributed when this is one rank of several and the process group is up."""
    if world() <= 1:
        return None
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def init() -> None:
    """Join the launcher's process group (NCCL with a GPU, gloo without) before anything a rank
    decides alone: the barriers of a stage's setup need it, and DeepSpeed reuses it."""
    if world() <= 1:
        return
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")


def barrier() -> None:
    dist = _dist()
    if dist is not None:
        dist.barrier()


def finish() -> None:
    """Leave the process group once every rank is done (left to interpreter exit, gloo's threads
    could abort a finished rank: "terminate called without an active exception")."""
    dist = _dist()
    if dist is not None:
        dist.barrier()
        dist.destroy_process_group()


def shard(items: Sequence[Any]) -> list[Any]:
    """This rank's share of ``items`` (every rank holds the same list)."""
    return list(items[rank()::world()])


def gather(value: Any) -> list[Any]:
    """``value`` of every rank, in rank order (a list of one without ranks)."""
    dist = _dist()
    if dist is None:
        return [value]
    out: list[Any] = [None] * world()
    dist.all_gather_object(out, value)
    return out


def all_sum(values: Sequence[float]) -> list[float]:
    """Element-wise sum of ``values`` over ranks."""
    return [sum(col) for col in zip(*gather([float(v) for v in values]))]


def any_rank(flag: bool) -> bool:
    """True on every rank when it is true on one (a stop request every rank must honour at the
    same step: a rank that stopped alone would leave the others waiting in a collective)."""
    return any(gather(bool(flag)))


def combine_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """One row for the step: each number averaged over the ranks that logged it (``SUMMED`` keys
    added up); other values as rank 0 has them."""
    rows = gather(metrics)
    if len(rows) == 1:
        return metrics
    out = dict(rows[0])
    for key in {k for row in rows for k in row}:
        nums = [row[key] for row in rows
                if isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool)]
        if nums:
            out[key] = sum(nums) if key in SUMMED else sum(nums) / len(nums)
    return out


def check_sizes(episodes_per_step: int, mini_batch_size: int, what: str) -> None:
    """Every rank plays and trains on the same number of episodes (ZeRO's collectives need the
    same number of forward passes on every rank)."""
    n = world()
    for key, value in (("episodes_per_step", episodes_per_step), ("mini_batch_size", mini_batch_size)):
        if value % n:
            raise ValueError(f"{what}: {key} = {value} does not split over {n} ranks; make it a multiple of {n}")
