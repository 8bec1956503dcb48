"""`kag train recipe`: the five stages in one run directory, wired, resumable after Ctrl-C and
SIGKILL without mixing stages, with curves and a report; real subprocesses, real signals, the
tiny local model on the copy-digit environment."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kag.cli.main import cli
from kag.core.plugins import Plugins
from kag.core.records import Trajectory
from kag.plugins.algorithms.ppo.base import progress_line
from kag.plugins.algorithms.ppo.config import STAGES, train_config_from_dict
from kag.plugins.algorithms.ppo.ppo_stage import success_rate
from kag.plugins.algorithms.ppo.report import first_last

ROOT = Path(__file__).resolve().parents[3]
TINY_CONFIG = ROOT / "examples" / "train" / "recipe_tiny.toml"
# the shipped config, made small: a few steps of 8 episodes per stage, a checkpoint every step
QUICK = ["--set", "episodes_per_step=8", "--set", "mini_batch_size=8", "--set", "micro_batch_size=8",
         "--set", "save_every=1", "--set", "rft_min_reward=-10", "--set", "warmup.steps=4",
         "--set", "collect.num_episodes=16", "--set", "value-pretrain.steps=2", "--set", "agentic.steps=2"]


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_dir_wires_each_stage_to_the_earlier_ones_and_the_file_still_wins():
    train = {"run_dir": "runs/r", "rft": {"init_from": "elsewhere"}}
    cfg = {s: train_config_from_dict(s, {"train": train}) for s in STAGES}
    assert {s: cfg[s].output_dir for s in STAGES} == {s: f"runs/r/{s}" for s in STAGES}
    assert cfg["collect"].init_from == "runs/r/warmup" and cfg["collect"].data == "runs/r/collect/trajectories.jsonl"
    assert cfg["rft"].init_from == "elsewhere" and cfg["rft"].data == "runs/r/collect/trajectories.jsonl"
    assert "init_from" not in cfg["rft"].wired
    assert cfg["value-pretrain"].critic_from == "runs/r/warmup" and cfg["value-pretrain"].init_from == "runs/r/rft"
    assert cfg["agentic"].init_from == "runs/r/rft" and cfg["agentic"].critic_from == "runs/r/value-pretrain"
    assert cfg["warmup"].init_from is None and cfg["warmup"].save_every > 0  # checkpoints by default
    # without run_dir nothing is wired, but no two stages share a directory
    assert train_config_from_dict("agentic", {"train": {}}).output_dir == "runs/train/agentic"
    assert train_config_from_dict("agentic", {"train": {}}).init_from is None


def test_a_stage_never_resumes_another_stages_checkpoint_nor_starts_without_its_inputs(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    small = {"model": "tiny", "episodes_per_step": 2, "mini_batch_size": 2, "max_new_tokens": 2, "steps": 1,
             "tensorboard": False, "num_episodes": 2, "output_dir": str(tmp_path / "shared")}
    cfg = train_config_from_dict("collect", {"train": small})
    plugins.create("algorithm", "collect", config=cfg, plugins=plugins).run()
    agentic = train_config_from_dict("agentic", {"train": small})
    with pytest.raises(ValueError, match=r"collect's checkpoint \(step 1\), not agentic's"):
        plugins.create("algorithm", "agentic", config=agentic, plugins=plugins).run()
    assert {r["stage"] for r in rows(tmp_path / "shared" / "metrics.jsonl")} == {"collect"}  # nothing mixed in
    import shutil

    shutil.rmtree(tmp_path / "shared" / "checkpoint")  # no checkpoint left, but collect's metrics are
    with pytest.raises(ValueError, match="holds stage collect's metrics"):
        plugins.create("algorithm", "agentic", config=agentic, plugins=plugins).run()

    unwired = {k: v for k, v in small.items() if k != "output_dir"}
    wired = train_config_from_dict("rft", {"train": {**unwired, "run_dir": str(tmp_path / "r")}})
    with pytest.raises(ValueError, match=r"reads warmup's output .*run `kag train warmup` with this config first"):
        plugins.create("algorithm", "rft", config=wired, plugins=plugins).run()
    assert not (tmp_path / "r" / "rft" / "checkpoint").exists()


def _start(run_dir, *extra):
    cmd = [sys.executable, "-m", "kag.cli.main", "train", "recipe", "--config", str(TINY_CONFIG),
           "--run-dir", str(run_dir), *QUICK, *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=env)


def _wait_for(proc, ready, what):
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not ready():
        time.sleep(0.1)
    assert proc.poll() is None, f"ended before {what}: " + proc.communicate()[1][-3000:]


def test_recipe_runs_every_stage_and_resumes_after_ctrl_c_and_a_kill_without_mixing_stages(tmp_path):
    run = tmp_path / "run"
    # 1. Ctrl-C in warm-up: the step in hand ends, a checkpoint is saved, exit 130
    proc = _start(run)
    _wait_for(proc, lambda: (run / "warmup" / "metrics.jsonl").is_file(), "warm-up's first step")
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "recipe: warmup ->" in err and "the same command resumes" in err and "Traceback" not in err
    saved = json.loads((run / "warmup" / "checkpoint" / "state.json").read_text())
    assert saved["stage"] == "warmup" and saved["step"] == len(rows(run / "warmup" / "metrics.jsonl")) >= 1
    if not saved["finished"]:  # the next stage, run alone, will not play with a half-trained actor
        shared = [v for v in QUICK[1::2] if "." not in v.partition("=")[0]] + [f"run_dir={run}"]
        res = CliRunner().invoke(cli, ["train", "collect", "--config", str(TINY_CONFIG),
                                       *[x for v in shared for x in ("--set", v)]])
        assert res.exit_code == 2 and f"warmup stopped at step {saved['step']} before it finished" in res.output

    # 2. SIGKILL in collect (nothing saved on the way out)
    proc = _start(run)
    _wait_for(proc, lambda: (run / "collect" / "metrics.jsonl").is_file(), "collect's first step")
    os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert f"resuming at step {saved['step']}" in err or saved["step"] == 4, err[-3000:]
    # collect's two steps take a fraction of a second: on a loaded machine the kill (polled every
    # 0.1 s) can land after collect ended, and then the stage it cuts is the next one
    assert list(json.loads((run / "recipe.json").read_text())["finished"]) in (["warmup"], ["warmup", "collect"])

    # 3. the same command finishes the run: collect resumes, the rest run in order
    res = CliRunner().invoke(cli, ["train", "recipe", "--config", str(TINY_CONFIG), "--run-dir", str(run), *QUICK])
    assert res.exit_code == 0, res.output
    assert "warmup: finished earlier, skipped" in res.output and "recipe: report" in res.output
    state = json.loads((run / "recipe.json").read_text())
    assert list(state["finished"]) == list(STAGES)
    expected_steps = {"warmup": 4, "collect": 2, "rft": 2, "value-pretrain": 2, "agentic": 2}
    for stage, n in expected_steps.items():
        logged = rows(run / stage / "metrics.jsonl")
        assert [r["step"] for r in logged] == list(range(1, n + 1)), stage  # resumed, never repeated
        assert {r["stage"] for r in logged} == {stage}  # never mixed
        assert (run / stage / "curves.png").stat().st_size > 1000
        assert json.loads((run / stage / "checkpoint" / "state.json").read_text())["stage"] == stage
    assert len((run / "collect" / "trajectories.jsonl").read_text().splitlines()) == 16
    assert all(r["turns"] == 2 for r in rows(run / "agentic" / "metrics.jsonl"))  # two-turn episodes
    kept = state["finished"]["rft"]["kept"]
    assert state["finished"]["rft"]["collected"] == 16 and kept >= 1

    report = (run / "report.md").read_text()
    for stage in STAGES:
        assert f"## {stage}" in report and f"![{stage} curves]({stage}/curves.png)" in report
    assert f"| keep rate | {kept}/16 = {kept / 16:.3f} |" in report and "| explained variance |" in report

    # 4. rerun: nothing left to do; `kag train report` rebuilds the page
    res = CliRunner().invoke(cli, ["train", "recipe", "--config", str(TINY_CONFIG), "--run-dir", str(run), *QUICK])
    assert res.exit_code == 0 and res.output.count("finished earlier, skipped") == 5, res.output
    (run / "report.md").unlink()
    res = CliRunner().invoke(cli, ["train", "report", str(run)])
    assert res.exit_code == 0 and (run / "report.md").is_file()
    res = CliRunner().invoke(cli, ["train", "report", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "no stage metrics" in res.output


def test_recipe_input_errors_are_one_line(tmp_path):
    bad = tmp_path / "r.toml"
    bad.write_text('[train]\nmodel = "tiny"\n[train.rft]\noutput_dir = "x"\n')
    res = CliRunner().invoke(cli, ["train", "recipe", "--config", str(bad), "--run-dir", str(tmp_path / "r")])
    assert res.exit_code == 2 and "[train.rft] sets output_dir" in res.output
    res = CliRunner().invoke(cli, ["train", "recipe", "--config", str(bad)])
    assert res.exit_code == 2 and "needs a run directory" in res.output
    res = CliRunner().invoke(cli, ["train", "recipe", "--config", str(TINY_CONFIG), "--set", "warmpu.steps=1"])
    assert res.exit_code == 2 and "'warmpu' is not a stage" in res.output


def test_progress_line_names_the_step_of_how_many_and_what_to_watch():
    """(tests/cli/test_run_eval.py sees the lines on a real terminal.)"""
    line = progress_line("warmup", 3, 40, {"reward_mean": 0.5, "approx_kl": 0.01, "clip_frac": 0.2,
                                            "tokens_per_s": 1234.0, "other": 1.0})
    assert line == "warmup 3/40 reward=0.5 kl=0.01 clip=0.2 tok/s=1234"


def test_kernel_step_infos_give_pass_and_faster_than_compile_rates():
    def traj(*infos):
        return Trajectory(episode_id="e", task="t", metadata={"step_info": list(infos)})

    trajs = [traj({"right": False, "correct": False}, {"right": True, "correct": True, "speedup_vs_compile": 1.3}),
             traj({"right": True, "correct": True, "speedup_vs_compile": 0.7}),
             traj({"right": False, "correct": False, "speedup_vs_compile": None}),
             traj({"right": False, "reason": "no answer"})]
    rates = success_rate(trajs)
    assert rates["pass_frac"] == pytest.approx(2 / 3) and rates["faster_than_compile_frac"] == pytest.approx(1 / 3)
    assert rates["right_frac"] == pytest.approx(2 / 5)
    assert "pass_frac" not in success_rate([traj({"right": True})])  # copy-digit: no verdicts, no rates


@pytest.mark.slow
def test_shipped_tiny_recipe_raises_reward_in_warmup_and_agentic(tmp_path):
    """The shipped CPU config end to end, as is: warm-up and agentic PPO both raise the mean reward."""
    run = tmp_path / "run"
    t0 = time.time()
    res = CliRunner().invoke(cli, ["train", "recipe", "--config", str(TINY_CONFIG), "--run-dir", str(run)])
    assert res.exit_code == 0, res.output
    warm = first_last(rows(run / "warmup" / "metrics.jsonl"), "reward_mean")
    agentic = first_last(rows(run / "agentic" / "metrics.jsonl"), "reward_mean")
    state = json.loads((run / "recipe.json").read_text())["finished"]
    print(f"\nrecipe_tiny: warm-up reward {warm[0]:.3f} -> {warm[1]:.3f}, agentic {agentic[0]:.3f} -> {agentic[1]:.3f}, "
          f"RFT kept {state['rft']['kept']}/{state['rft']['collected']}, {time.time() - t0:.0f} s")
    assert warm[1] > warm[0] + 0.2 and agentic[1] > agentic[0] + 0.1
