"""Learning check: warm-up PPO raises the copy-digit reward of a random tiny model on the CPU.

Run with ``pytest -m slow tests/plugins/algorithms/test_learning.py -s``; set
``KAG_LEARNING_PLOT=/path/curve.png`` to save the reward curve.
"""

import json
import os
import time

import pytest

from kag.core.plugins import Plugins
from kag.plugins.algorithms.ppo.config import train_config_from_dict

LEARNING_CONFIG = {
    "train": {
        "model": "tiny", "environment": "copy-digit", "seed": 0, "actor_lr": 1e-3, "critic_lr": 3e-3,
        "episodes_per_step": 32, "mini_batch_size": 16, "micro_batch_size": 32, "ppo_epochs": 2,
        "max_new_tokens": 2, "steps": 40, "tensorboard": False,
    },
    # 1 for the right digit, 0.2 for a wrong digit, 0 for anything else
    "environments": {"copy-digit": {"digits": "0123", "digit_reward": 0.2}},
}


def _plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, [r["reward_mean"] for r in rows], label="mean reward")
    ax.plot(steps, [r["right_frac"] for r in rows], label="right copies")
    ax.set_xlabel("PPO step (32 episodes)")
    ax.set_title("warmup PPO, tiny model, copy-digit (CPU)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


@pytest.mark.slow
def test_warmup_ppo_raises_reward(tmp_path):
    data = json.loads(json.dumps(LEARNING_CONFIG))
    data["train"]["output_dir"] = str(tmp_path / "warmup")
    cfg = train_config_from_dict("warmup", data)
    plugins = Plugins(load_entrypoints=False)
    t0 = time.time()
    plugins.create("algorithm", "warmup", config=cfg, plugins=plugins).run()
    elapsed = time.time() - t0
    rows = [json.loads(r) for r in (tmp_path / "warmup" / "metrics.jsonl").read_text().splitlines()]
    start = sum(r["reward_mean"] for r in rows[:5]) / 5
    end = sum(r["reward_mean"] for r in rows[-5:]) / 5
    right_start = sum(r["right_frac"] for r in rows[:5]) / 5
    right_end = sum(r["right_frac"] for r in rows[-5:]) / 5
    print(f"\nlearning check: reward {start:.3f} -> {end:.3f}, right copies {right_start:.3f} -> {right_end:.3f}, "
          f"{len(rows)} steps in {elapsed:.0f}s")
    print("curve:", [round(r["reward_mean"], 3) for r in rows])
    if os.environ.get("KAG_LEARNING_PLOT"):
        _plot(rows, os.environ["KAG_LEARNING_PLOT"])
    assert end > start + 0.2, f"mean reward did not rise clearly: {start:.3f} -> {end:.3f}"


@pytest.mark.slow
def test_agentic_ppo_raises_reward_on_two_turn_episodes(tmp_path):
    """Multi-turn PPO (the second digit arrives as a tool message) learns too, from scratch."""
    data = json.loads(json.dumps(LEARNING_CONFIG))
    data["train"].update(output_dir=str(tmp_path / "agentic"), max_turns=2)
    data["environments"]["copy-digit"]["turns"] = 2
    cfg = train_config_from_dict("agentic", data)
    plugins = Plugins(load_entrypoints=False)
    plugins.create("algorithm", "agentic", config=cfg, plugins=plugins).run()
    rows = [json.loads(r) for r in (tmp_path / "agentic" / "metrics.jsonl").read_text().splitlines()]
    start = sum(r["reward_mean"] for r in rows[:5]) / 5
    end = sum(r["reward_mean"] for r in rows[-5:]) / 5
    print(f"\nagentic learning check: reward {start:.3f} -> {end:.3f} over {len(rows)} steps")
    print("curve:", [round(r["reward_mean"], 3) for r in rows])
    if os.environ.get("KAG_LEARNING_PLOT"):
        _plot(rows, os.environ["KAG_LEARNING_PLOT"].replace(".png", "_agentic.png"))
    assert all(r["turns"] == 2 for r in rows)
    assert end > start + 0.2, f"mean reward did not rise clearly: {start:.3f} -> {end:.3f}"
