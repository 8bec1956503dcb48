"""Where the RL stages' per-step metrics go besides ``metrics.jsonl``: ``tensorboard`` and ``wandb``.

Neutral side (kag's own numbers, no solution code). Each is a ``logger`` plugin like a third-party
one; a train config picks them with ``loggers = ["tensorboard", "wandb"]`` and passes options in
``[loggers.NAME]``. The jsonl record is not a plugin: every stage writes it, since the reports and
resumes read it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from kag.plugin import hookimpl


def _numbers(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class TensorBoardSink:
    """Scalars under ``STAGE/KEY`` in ``out_dir/tensorboard`` (``tensorboard --logdir``)."""

    def __init__(self, out_dir: str | Path, stage: str, config: dict[str, Any] | None = None, **_: Any):
        from torch.utils.tensorboard import SummaryWriter

        self.stage = stage
        self.writer = SummaryWriter(str(Path(out_dir) / "tensorboard"))

    @staticmethod
    def check_available() -> str | None:
        from kag.plugin import missing

        return missing("tensorboard", "the tensorboard logger")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in _numbers(metrics).items():
            self.writer.add_scalar(f"{self.stage}/{key}", value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """A Weights & Biases run per stage (``project``, ``entity``, ``mode`` = online / offline /
    disabled as wandb reads them; offline needs no account), its config the stage's settings."""

    def __init__(self, out_dir: str | Path, stage: str, config: dict[str, Any] | None = None,
                 project: str = "kag", entity: str | None = None, mode: str | None = None, name: str | None = None,
                 **_: Any):
        import wandb

        self.run = wandb.init(project=project, entity=entity, mode=mode, name=name or f"{Path(out_dir).name}-{stage}",
                              dir=str(out_dir), config=dict(config or {}), group=stage, reinit="create_new")

    @staticmethod
    def check_available() -> str | None:
        from kag.plugin import missing

        return missing("wandb", "the wandb logger")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(_numbers(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


@hookimpl
def kag_register_loggers(register) -> None:
    register("tensorboard", TensorBoardSink)
    register("wandb", WandbSink)
