"""Short warm-up runs of the tiny model side by side, for tests that a knob trains as another setting does."""

import json
from pathlib import Path
from typing import Any

COMMON = {"model": "tiny", "environment": "copy-digit", "actor_lr": 1e-3, "critic_lr": 1e-3,
          "episodes_per_step": 4, "mini_batch_size": 4, "micro_batch_size": 2, "max_new_tokens": 2,
          "steps": 2, "tensorboard": False}
METRICS = ("policy_loss", "value_loss", "actor_grad_norm", "critic_grad_norm", "reward_mean")


def warmup_runs(tmp_path: Path, variants: dict[str, dict[str, Any]], environments: dict[str, Any] | None = None,
                **common: Any) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Each variant's settings over COMMON (and ``common``) run as the warm-up stage in tmp_path/NAME:
    (NAME -> its metrics rows, NAME -> its stage after the run)."""
    from kag.core.plugins import Plugins
    from kag.plugins.algorithms.ppo.config import train_config_from_dict

    plugins = Plugins(load_entrypoints=False)
    rows, stages = {}, {}
    for name, over in variants.items():
        train = {**COMMON, **common, **over, "output_dir": str(tmp_path / name)}
        cfg = train_config_from_dict("warmup", {"train": train, "environments": environments or {}})
        stages[name] = plugins.create("algorithm", "warmup", config=cfg, plugins=plugins)
        stages[name].run()
        rows[name] = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    return rows, stages


def assert_same_training(a_rows: list[dict[str, Any]], b_rows: list[dict[str, Any]], rel: float = 1e-4) -> None:
    """The same number of steps and, step for step, the same losses, gradient norms and rewards."""
    assert len(a_rows) == len(b_rows) == COMMON["steps"]
    for a, b in zip(a_rows, b_rows):
        for key in METRICS:
            assert abs(a[key] - b[key]) <= rel * max(1.0, abs(a[key])), (key, a[key], b[key])
