import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kag.cli.common import parse_key_values
from kag.cli.main import cli
from tests.conftest import kernelbench_ids, run_kag


def test_help_is_fast_and_imports_no_torch():
    code = ("import sys, time; t=time.perf_counter(); from kag.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('TORCH' if 'torch' in sys.modules else 'NOTORCH', time.perf_counter()-t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "NOTORCH" in out
    start = time.perf_counter()
    proc = run_kag("--help")
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0 and "plugins" in proc.stdout and "tasks" in proc.stdout
    assert elapsed < 1.0, f"kag --help took {elapsed:.2f} s"


def test_plugins_json_lists_every_kind():
    proc = run_kag("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["kinds"]
    for kind in ("dataset", "tool", "sandbox", "baseline", "reward", "guard", "policy", "algorithm", "backend"):
        assert kind in data
    rewards = {r["name"]: r for r in data["reward"]}
    assert rewards["milestone"]["origin"] == "built-in" and rewards["milestone"]["selected"]


def test_plugin_selection_errors_exit_2_with_the_valid_names():
    proc = run_kag("plugins", "--plugin", "reward=nope")
    assert proc.returncode == 2
    assert "unknown reward 'nope'" in proc.stderr and "milestone" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_config_file_selects_plugins(tmp_path):
    (tmp_path / "kag.toml").write_text('[plugins]\nreward = "speedup"\n')
    data = json.loads(run_kag("plugins", "--json", cwd=tmp_path).stdout)["kinds"]
    assert {r["name"] for r in data["reward"] if r["selected"]} == {"speedup"}
    bad = tmp_path / "bad.toml"
    bad.write_text("[plugins\n")
    proc = run_kag("plugins", "--config", str(bad))
    assert proc.returncode == 2 and "bad.toml: not valid TOML" in proc.stderr


def test_a_section_kag_does_not_read_is_an_error_with_the_fix(tmp_path):
    (tmp_path / "kag.toml").write_text('[plugin]\nreward = "speedup"\n[policies.replay]\npath = "x.json"\n')
    proc = run_kag("plugins", cwd=tmp_path)
    assert proc.returncode == 2 and "unknown section [plugin]; did you mean [plugins]?" in proc.stderr
    (tmp_path / "kag.toml").write_text('[plugins]\nreward = "speedup"\n[sandboxes.docker]\nimage = "x"\n')
    assert run_kag("plugins", cwd=tmp_path).returncode == 0


def test_input_errors_are_one_line_with_the_fix(tmp_path):
    example = Path(__file__).resolve().parents[2] / "examples" / "relu" / "cpu"
    proc = run_kag("run", "--task", str(example / "model.py"), "--backend", "cpu", "--policy", "replay",
                   "--policy-option", f"path={tmp_path / 'missing.json'}", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and "missing.json does not exist; give path=FILE" in proc.stderr
    assert "Traceback" not in proc.stderr
    env = {k: v for k, v in os.environ.items() if k != "KAG_KERNELBENCH"}
    proc = subprocess.run([sys.executable, "-m", "kag.cli.main", "score", "--task", "kernelbench:level1/19",
                           "--solution", str(example)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2 and "set KAG_KERNELBENCH=PATH" in proc.stderr and "--task FILE.py" in proc.stderr
    proc = run_kag("verify", "--workspace", str(tmp_path / "not-a-workspace"))
    assert proc.returncode == 2 and "not a workspace (no model.py there); make one with `kag workspace" in proc.stderr


def test_tasks_json(kernelbench_path):
    proc = run_kag("tasks", "--dataset", f"kernelbench:{kernelbench_path}", "--level", "2", "--ids", "1-14", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    expected = [i for i in kernelbench_ids(kernelbench_path, 2) if i <= 14]
    assert data["count"] == len(expected) >= 2 and data["skipped"] == []
    assert [t["problem_id"] for t in data["tasks"]] == expected


def test_tasks_from_kernelbench_env_and_bad_path(kernelbench_path, tmp_path):
    proc = run_kag("tasks", "--dataset", "kernelbench", "--level", "3", env={"KAG_KERNELBENCH": str(kernelbench_path)})
    assert proc.returncode == 0 and f"{len(kernelbench_ids(kernelbench_path, 3))} tasks loaded" in proc.stderr
    proc = run_kag("tasks", "--dataset", f"kernelbench:{tmp_path}")
    assert proc.returncode == 2 and "no level1..level4" in proc.stderr


def test_key_values_are_read_like_kag_toml():
    """--policy-option, --set and kag data's --policy-option share one parser: a VALUE means what
    it would in the TOML config, JSON fills TOML's gaps, anything else stays text."""
    got = parse_key_values(("steps=5", "lr=1e-5", "bf16=true", 'engine="deepspeed"', "ids=[1, 2]",
                            "env_options={turns = 2}", 'extra_body={"top_k": 20}', "max_tokens=null",
                            "base_url=http://localhost:8000/v1", " path =a=b", "model=", "steps=6"), "--set")
    assert got == {"steps": 6, "lr": 1e-5, "bf16": True, "engine": "deepspeed", "ids": [1, 2],
                   "env_options": {"turns": 2}, "extra_body": {"top_k": 20}, "max_tokens": None,
                   "base_url": "http://localhost:8000/v1", "path": "a=b", "model": ""}


def test_malformed_key_value_is_a_usage_error_naming_the_option_and_the_fix(tmp_path):
    for bad in ("steps", "=5", " =5"):
        with pytest.raises(click.BadParameter) as info:
            parse_key_values(("ok=1", bad), "--set", "steps=5")
        assert info.value.format_message() == (f"Invalid value for --set: {bad!r} is not KEY=VALUE; "
                                               f"write e.g. --set steps=5")
    config = tmp_path / "train.toml"
    config.write_text("[train]\n")
    model = Path(__file__).resolve().parents[2] / "examples" / "relu" / "cpu" / "model.py"
    runs = {"--set": ["train", "warmup", "--config", str(config), "--set", "steps"],
            "--policy-option": ["run", "--task", str(model), "--policy-option", "steps", "--out", str(tmp_path / "o")]}
    for option, args in runs.items():
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        assert f"Error: Invalid value for {option}: 'steps' is not KEY=VALUE; write e.g. {option} " in result.output
        assert "Traceback" not in result.output


def test_plugins_marks_the_backend_this_machine_gets(tmp_path):
    from kag.core.eval.orchestrator.gpu_pool import pick_backend

    data = json.loads(run_kag("plugins", "--json", cwd=tmp_path).stdout)["kinds"]["backend"]
    assert [r["name"] for r in data if r["selected"]] == [pick_backend("auto")]
    assert all(r["available"] for r in data if r["selected"])


def test_run_help_says_how_to_play_the_model():
    out = CliRunner().invoke(cli, ["run", "--help"]).output
    assert "human: you play the model" in out and "TOOL {json arguments}" in out and "'done'" in out


def test_plugins_table_names_the_extra_that_brings_a_missing_package(tmp_path):
    """A reason's ``kag[rl]`` is printed as text (rich would take ``[rl]`` for markup and drop it)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here: no missing-package reason to print")
    proc = run_kag("plugins", cwd=tmp_path, env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if "vllm" in line and "needs" in line)
    assert "pip install 'kag[rl]'" in line and "install kag[rl]" in line


def test_workspace_help_says_the_default_backend_is_auto():
    out = " ".join(CliRunner().invoke(cli, ["workspace", "--help"], terminal_width=200).output.split())
    assert "auto: cuda when a GPU is visible, else cpu" in out and "cuda (default)" not in out


def test_a_failure_before_the_judge_names_no_unknown_device():
    from kag.core.eval.orchestrator.feedback import format_eval
    from kag.core.records import EvalResult

    result = EvalResult(task="relu", backend="cpu", error="kernels/relu.cpp: error: expected ';'",
                        error_kind="build")
    header = format_eval(result).splitlines()[0]
    assert header == "task relu [cpu]: FAIL"
    result.device = {"name": "Intel Xeon", "type": "cpu"}
    assert format_eval(result).splitlines()[0] == "task relu [cpu on Intel Xeon]: FAIL"
