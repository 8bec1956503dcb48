"""Every stage end to end on the CPU with the tiny local model, plus resume and the CLI."""

import json

import pytest
from click.testing import CliRunner

from kag.cli.main import cli
from kag.core.plugins import Plugins
from kag.core.records import Trajectory, from_json
from kag.plugins.algorithms.ppo.config import train_config_from_dict

COMMON = {"model": "tiny", "environment": "copy-digit", "actor_lr": 1e-3, "critic_lr": 1e-3,
          "episodes_per_step": 4, "mini_batch_size": 4, "micro_batch_size": 2, "max_new_tokens": 2,
          "steps": 2, "tensorboard": False}


def run(stage, plugins, **over):
    cfg = train_config_from_dict(stage, {"train": {**COMMON, **over}})
    return plugins.create("algorithm", stage, config=cfg, plugins=plugins).run()


def metrics(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_all_stages_end_to_end(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    assert {"warmup", "collect", "rft", "value-pretrain", "agentic", "ppo"} <= set(plugins.names("algorithm"))
    warm, data = tmp_path / "warmup", tmp_path / "collect" / "traj.jsonl"

    out = run("warmup", plugins, output_dir=str(warm))
    assert out["step"] == 2 and (warm / "checkpoint" / "actor" / "config.json").is_file()
    assert (warm / "checkpoint" / "critic" / "value_head.pt").is_file()
    rows = metrics(warm)
    for key in ("reward_mean", "entropy", "clip_frac", "explained_variance", "traj_tokens", "approx_kl"):
        assert key in rows[-1]
    # rerun with more steps: resumes at step 2, does one more
    run("warmup", plugins, output_dir=str(warm), steps=3)
    assert [r["step"] for r in metrics(warm)] == [1, 2, 3]

    env2 = {"env_options": {"turns": 2}}
    out = run("collect", plugins, output_dir=str(tmp_path / "collect"), init_from=str(warm), data=str(data),
              num_episodes=6, max_turns=2, **env2)
    trajs = [from_json(Trajectory, line) for line in data.read_text().splitlines()]
    assert len(trajs) == 6 and all(len(t.turns) == 2 for t in trajs)
    assert all(t.turns[0].response_logprobs for t in trajs)
    run("collect", plugins, output_dir=str(tmp_path / "collect"), init_from=str(warm), data=str(data),
        num_episodes=6, max_turns=2, **env2)
    assert len(data.read_text().splitlines()) == 6  # resumed: nothing left to collect

    # a random tiny model rarely earns reward; keep everything so the fine-tuning path runs
    out = run("rft", plugins, output_dir=str(tmp_path / "rft"), init_from=str(warm), data=str(data),
              rft_min_reward=-10.0, rft_reject_invalid=False, rft_max_identical_repeats=99, rft_min_loop_repeats=99)
    assert out["kept"] == 6 and out["step"] == 2
    assert "sft_loss" in metrics(tmp_path / "rft")[-1]

    out = run("value-pretrain", plugins, output_dir=str(tmp_path / "vp"), init_from=str(warm), data=str(data))
    assert (tmp_path / "vp" / "checkpoint" / "critic" / "value_head.pt").is_file()
    assert "value_loss" in metrics(tmp_path / "vp")[-1]
    assert not (tmp_path / "vp" / "checkpoint" / "actor").exists()

    out = run("agentic", plugins, output_dir=str(tmp_path / "agentic"), init_from=str(tmp_path / "rft"),
              critic_from=str(tmp_path / "vp"), max_turns=2, kl_coef=0.01, **env2)
    last = metrics(tmp_path / "agentic")[-1]
    assert last["turns"] == 2.0 and "kl_ref" in last and "tis_weight_mean" in last


def test_collect_killed_between_writing_a_steps_episodes_and_logging_it_logs_that_step_on_resume(tmp_path):
    """The recipe test's SIGKILL once landed there: episodes 5-8 written, step 2's row and checkpoint
    not, so the resumed run found every episode and logged steps [1] of 2."""
    plugins = Plugins(load_entrypoints=False)
    out, data = tmp_path / "c", tmp_path / "c" / "traj.jsonl"
    run("collect", plugins, output_dir=str(out), data=str(data), num_episodes=8)
    assert [r["step"] for r in metrics(out)] == [1, 2]
    # back to the moment of the kill: the checkpoint and the metrics of step 1, the episodes of both steps
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    (out / "checkpoint" / "state.json").write_text(json.dumps({**state, "step": 1, "finished": False}))
    (out / "metrics.jsonl").write_text((out / "metrics.jsonl").read_text().splitlines()[0] + "\n")
    run("collect", plugins, output_dir=str(out), data=str(data), num_episodes=8)
    rows = metrics(out)
    assert [r["step"] for r in rows] == [1, 2] and rows[1]["recovered"] and rows[1]["episodes"] == 8
    assert len(data.read_text().splitlines()) == 8  # nothing collected twice
    assert json.loads((out / "checkpoint" / "state.json").read_text())["finished"]


def test_rft_with_nothing_kept_says_why(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    data = tmp_path / "t.jsonl"
    run("collect", plugins, output_dir=str(tmp_path / "c"), data=str(data), num_episodes=2)
    with pytest.raises(ValueError, match="passed the RFT filter"):
        run("rft", plugins, output_dir=str(tmp_path / "r"), data=str(data), rft_min_reward=100.0)


def test_config_errors_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(ValueError, match="x.toml: unknown \\[train\\] key\\(s\\) stepz"):
        train_config_from_dict("warmup", {"train": {"stepz": 1}}, where="x.toml")
    with pytest.raises(ValueError, match="data ="):
        train_config_from_dict("rft", {"train": {}})
    cfg = train_config_from_dict("agentic", {"train": {"steps": 1, "agentic": {"steps": 7}},
                                             "environments": {"copy-digit": {"turns": 3}}})
    assert cfg.steps == 7 and cfg.env_options == {"turns": 3}
    # the executor's options: kag.toml's [executors.NAME] (as kag eval reads them), under [train]'s own
    cfg = train_config_from_dict("agentic", {"train": {"executor": "ray", "env_workers": 4,
                                                       "executor_options": {"max_retries": 5}},
                                             "executors": {"ray": {"address": "head:6379", "max_retries": 1}}})
    assert cfg.executor_options == {"address": "head:6379", "max_retries": 5} and cfg.env_workers == 4
    with pytest.raises(ValueError, match="env_workers must be >= 1"):
        train_config_from_dict("agentic", {"train": {"env_workers": 0}})


def test_cli_help_documents_each_stage_and_reports_bad_input(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["train", "--help"])
    assert res.exit_code == 0
    for stage in ("warmup", "collect", "rft", "value-pretrain", "agentic"):
        assert stage in res.output
        sub = runner.invoke(cli, ["train", stage, "--help"])
        assert sub.exit_code == 0 and "--config" in sub.output
    res = runner.invoke(cli, ["train", "warmup", "--config", str(tmp_path / "none.toml")])
    assert res.exit_code == 2 and "does not exist" in res.output
    bad = tmp_path / "bad.toml"
    bad.write_text("[train]\nstepz = 3\n")
    res = runner.invoke(cli, ["train", "warmup", "--config", str(bad)])
    assert res.exit_code == 2 and "stepz" in res.output


def test_cli_runs_a_stage(tmp_path):
    cfg = tmp_path / "train.toml"
    cfg.write_text(f'[train]\nmodel = "tiny"\nmax_new_tokens = 2\nepisodes_per_step = 2\nmini_batch_size = 2\n'
                   f'tensorboard = false\n[train.warmup]\noutput_dir = "{tmp_path / "w"}"\n')
    res = CliRunner().invoke(cli, ["train", "warmup", "--config", str(cfg), "--set", "steps=1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output[res.output.index("{"):])["step"] == 1


def test_ctrl_c_stops_training_between_steps_with_a_checkpoint_and_a_rerun_resumes(tmp_path):
    """A real SIGINT to a real `kag train warmup`: it finishes the step in hand, checkpoints, exits 130."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "w"
    cfg = tmp_path / "train.toml"
    cfg.write_text(f'[train]\nmodel = "tiny"\nmax_new_tokens = 2\nepisodes_per_step = 2\nmini_batch_size = 2\n'
                   f'tensorboard = false\n[train.warmup]\noutput_dir = "{out}"\n')
    cmd = [sys.executable, "-m", "kag.cli.main", "train", "warmup", "--config", str(cfg), "--set", "steps=100000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not (out / "metrics.jsonl").is_file():
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "stopping after this step" in err and "checkpoint at" in err and "Traceback" not in err
    step = json.loads((out / "checkpoint" / "state.json").read_text())["step"]
    assert step == len(metrics(out)) >= 1  # the checkpoint is of the last finished step
    res = CliRunner().invoke(cli, ["train", "warmup", "--config", str(cfg), "--set", f"steps={step + 1}"])
    assert res.exit_code == 0, res.output
    assert [r["step"] for r in metrics(out)] == list(range(1, step + 2))  # resumed, one more step
