"""``kag score`` / ``verify`` / ``profile`` on the CPU backend: JSON shape, exit codes, workspaces."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kag.cli.main import cli

REPO = Path(__file__).resolve().parents[4]
TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64, 256)]

def get_init_inputs():
    return []
'''
MODEL_NEW = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype))
'''


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("ws")
    (ws / "model.py").write_text(TASK)
    (ws / "model_new.py").write_text(MODEL_NEW)
    (ws / "notes.txt").write_text("not part of the solution")
    return ws


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KAG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cli-cache"))


# MODEL_NEW is plain torch (nothing to build), which the no-torch-fallback guard rejects; these tests
# are about the commands, so that one guard is switched off by name (the others stay on).
NO_FALLBACK_GUARD = ("--plugin", "guard=-no-torch-fallback")


def run(*args):
    return CliRunner().invoke(cli, [*args, *NO_FALLBACK_GUARD], catch_exceptions=False)


def test_score_json_has_the_documented_shape(workspace):
    res = run("score", "--task", str(workspace / "model.py"), "--solution", str(workspace), "--backend", "cpu",
              "--json", "--num-timed", "3", "--warmup", "1", "--num-checks", "2")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    for key in ("task", "compiled", "correct", "violations", "error", "times_ms", "speedup_vs_eager",
                "speedup_vs_compile", "reward", "device"):
        assert key in data
    assert data["compiled"] and data["correct"] and data["error"] is None and data["violations"] == []
    assert set(data["times_ms"]) >= {"candidate", "eager", "compile"}
    assert all(data["times_ms"][k] > 0 for k in ("candidate", "eager", "compile"))
    assert data["reward"]["name"] == "milestone" and data["reward"]["value"] >= 1
    assert data["device"]["backend"] == "cpu"
    assert data["metadata"]["ignored_files"] == ["model.py", "notes.txt"]


def test_verify_and_profile_take_a_workspace(workspace):
    res = run("verify", "--workspace", str(workspace), "--backend", "cpu", "--num-checks", "2")
    assert res.exit_code == 0 and "PASS" in res.output and "correct: True" in res.output
    res = run("profile", "--workspace", str(workspace), "--backend", "cpu", "--num-timed", "3", "--warmup", "1",
              "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["metadata"]["checks"] == "skipped"
    text = run("profile", "--workspace", str(workspace), "--backend", "cpu", "--num-timed", "2", "--warmup", "0")
    assert "TIMED (correctness not checked" in text.output and "correct: not checked" in text.output
    assert "FAIL" not in text.output
    assert data["times_ms"]["candidate"] > 0 and data["reward"] is None
    cache = data["metadata"]["baseline_cache"]
    assert set(cache) == {"eager", "compile"}
    for info in cache.values():  # cached by the score above if its timing settled, else timed again
        assert info["runs"] == 3 and (info["source"] == "cache") == (info["status"] == "hit")


def test_a_failed_verdict_exits_one_as_test_tools_do(workspace, tmp_path):
    """0 passed, 1 the verdict failed, 2 bad usage or input: scripts can rely on it."""
    (tmp_path / "model_new.py").write_text(MODEL_NEW.replace("x > 0, x", "x > 0, -x"))
    res = run("verify", "--task", str(workspace / "model.py"), "--solution", str(tmp_path), "--backend", "cpu",
              "--json", "--num-checks", "1")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["correct"] is False and data["error_kind"] == "mismatch" and data["reward"]["value"] == -1
    (tmp_path / "model_new.py").write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n")
    for mode in ("score", "profile"):  # a syntax error fails every mode, the one that checks nothing too
        checks = ("--num-checks", "1") if mode == "score" else ()  # profile checks nothing: no such option
        res = run(mode, "--task", str(workspace / "model.py"), "--solution", str(tmp_path), "--backend", "cpu",
                  *checks, "--num-timed", "2", "--warmup", "0")
        assert res.exit_code == 1, (mode, res.output)
    assert "Exit status: 0 passed, 1 the verdict failed" in run("score", "--help").output


def test_bad_input_exits_two_with_a_message(workspace, tmp_path):
    res = run("score", "--task", str(tmp_path / "missing.py"), "--solution", str(workspace), "--backend", "cpu")
    assert res.exit_code == 2 and "not a dataset id" in res.output
    res = run("score", "--task", str(workspace / "model.py"), "--solution", str(tmp_path), "--backend", "cpu")
    assert res.exit_code == 2 and "no model_new.py" in res.output
    res = run("score", "--solution", str(workspace))
    assert res.exit_code == 2 and "--workspace" in res.output
    (tmp_path / "model_new.py").write_text(MODEL_NEW)
    (tmp_path / "kernels").symlink_to(workspace)
    res = run("score", "--task", str(workspace / "model.py"), "--solution", str(tmp_path), "--backend", "cpu")
    assert res.exit_code == 2 and "kernels is a symbolic link: links are not allowed" in res.output
    (tmp_path / "kernels").unlink()
    (tmp_path / "model_new.py").unlink()
    (tmp_path / "bad.py").write_text("x = 1\n")
    res = run("verify", "--task", str(tmp_path / "bad.py"), "--solution", str(workspace), "--backend", "cpu")
    assert res.exit_code == 2 and "missing Model" in res.output


def test_dataset_ids_resolve_through_the_kernelbench_plugin(monkeypatch, tmp_path):
    root = tmp_path / "kb" / "level1"
    root.mkdir(parents=True)
    (root / "19_ReLU.py").write_text(TASK)
    monkeypatch.setenv("KAG_KERNELBENCH", str(tmp_path / "kb"))
    from kag.cli.common import make_plugins
    from kag.cli.score_cmd import resolve_task

    plugins, config = make_plugins((), None)
    task = resolve_task("kernelbench:level1/19", plugins, config)
    assert task.name == "level1/19_ReLU" and task.level == 1 and task.problem_id == 19
    res = run("verify", "--task", "kernelbench:level1/7", "--solution", str(tmp_path), "--backend", "cpu")
    assert res.exit_code == 2 and "no task with that level and id" in res.output


@pytest.mark.slow
def test_built_cpu_example_scores_through_the_real_cli(tmp_path):
    """The shipped CPU ReLU example: C++ build -> checks -> timing -> reward, via the kag script."""
    example = REPO / "examples" / "relu" / "cpu"
    if not (example / "model_new.py").is_file() or shutil.which("c++") is None:
        pytest.skip("the CPU ReLU example or a C++ compiler is missing")
    (tmp_path / "model.py").write_text(TASK)
    proc = subprocess.run(
        [sys.executable, "-m", "kag.cli.main", "score", "--task", str(tmp_path / "model.py"), "--solution",
         str(example), "--backend", "cpu", "--json", "--num-timed", "3", "--warmup", "1", "--num-checks", "2"],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["compiled"] and data["correct"], data["error"]
    assert data["durations_s"]["build"] > 0 and data["reward"]["value"] >= 1


def test_each_command_shows_only_the_options_it_uses():
    verify, profile, score = (CliRunner().invoke(cli, [m, "--help"]).output for m in ("verify", "profile", "score"))
    assert "--num-checks" in verify and "--num-timed" not in verify and "--reference" not in verify
    assert "--num-timed" in profile and "--reference" in profile and "--num-checks" not in profile
    assert all(o in score for o in ("--num-checks", "--num-timed", "--compile-mode")) and "--reference" not in score


def test_a_backend_this_machine_cannot_run_is_a_usage_error_at_once(workspace):
    """`--backend cuda` with a CPU-only torch (or no GPU): exit 2 and one line, in under a second,
    never a build that fails as the solution's (-1)."""
    import time

    from kag.core.plugins import Plugins

    why = Plugins().entry("backend", "cuda").availability()
    if why is None:
        pytest.skip("the cuda backend can run here")
    t0 = time.monotonic()
    res = CliRunner().invoke(cli, ["score", "--task", str(workspace / "model.py"), "--solution", str(workspace),
                                   "--backend", "cuda"])
    assert res.exit_code == 2 and "cannot run on this machine" in res.output, res.output
    assert time.monotonic() - t0 < 1.0
