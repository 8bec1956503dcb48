"""Learning on real kernels: warm-up PPO on ``kernel-choice`` (examples/train/kernel_choice.toml), every
pick built, checked and timed by the judge on the CPU backend, the milestone reward as is.

About 30 minutes on an idle 2-core machine (seed 0 took 33 min beside two other seeds); run with
``pytest -m slow tests/plugins/algorithms/test_kernel_learning.py -s``. Three seeds with bands:
bench/results/2026-11-26-29dc24e-cpu/README.md.
"""

import json
import tomllib
from pathlib import Path

import pytest

from kag.core.plugins import Plugins
from kag.plugins.algorithms.ppo.config import train_config_from_dict
from kag.plugins.algorithms.ppo.report import first_last

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "examples" / "train" / "kernel_choice.toml"


@pytest.mark.slow
def test_warmup_ppo_learns_to_pick_the_fast_kernel(tmp_path):
    data = tomllib.loads(CONFIG.read_text())
    data["train"]["output_dir"] = str(tmp_path / "warmup")
    data["environments"]["kernel-choice"]["path"] = str(REPO / "examples" / "train" / "kernel_choice")
    cfg = train_config_from_dict("warmup", data)
    plugins = Plugins(load_entrypoints=False)
    plugins.create("algorithm", "warmup", config=cfg, plugins=plugins).run()
    rows = [json.loads(r) for r in (tmp_path / "warmup" / "metrics.jsonl").read_text().splitlines()]
    reward = first_last(rows, "reward_mean")
    faster = first_last(rows, "faster_than_compile_frac")
    print(f"\nkernel-choice: reward {reward[0]:.3f} -> {reward[1]:.3f}, faster than compile "
          f"{faster[0]:.3f} -> {faster[1]:.3f} over {len(rows)} steps")
    assert reward[1] > reward[0] + 0.5, reward
    assert faster[1] > faster[0] + 0.1, faster
