"""A real third-party plugin (examples/plugins/kag-example-plugin, written only against kag.plugin),
pip-installed and discovered through its entry point; each of its kinds runs."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_kag

FIXTURE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "kag-example-plugin"


@pytest.fixture(scope="module")
def example_plugin_installed():
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", str(FIXTURE)], check=True)
    yield
    subprocess.run([*pip, "uninstall", "-y", "kag-example-plugin"], check=True)


def _listed(kind, *args, env=None):
    proc = run_kag("plugins", "--json", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    return {r["name"]: r for r in json.loads(proc.stdout)["kinds"][kind]}


def _rewards(*args, env=None):
    return _listed("reward", *args, env=env)


def test_entry_point_plugin_is_listed_and_selectable(example_plugin_installed):
    rewards = _rewards()
    assert rewards["example"]["origin"] == "kag-example-plugin 0.1.0"
    assert not rewards["example"]["selected"]
    assert _rewards("--plugin", "reward=example")["example"]["selected"]


def test_it_is_found_by_entry_point_not_import_path(example_plugin_installed):
    code = ("from kag.core.plugins import Plugins, DEFAULT_PLUGINS\n"
            "assert not any('example' in m for m in DEFAULT_PLUGINS)\n"
            "pl = Plugins(); e = pl.entry('reward', 'example'); print(e.plugin, e.origin)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["kag-example-plugin:example", "kag-example-plugin", "0.1.0"]


def test_allow_and_block_lists(example_plugin_installed):
    assert "example" not in _rewards(env={"KAG_DISABLE_PLUGINS": "example"})
    assert "example" not in _rewards(env={"KAG_LOAD_PLUGINS": "some-other-plugin"})
    assert "example" in _rewards(env={"KAG_LOAD_PLUGINS": "kag-example-plugin"})
    assert "milestone" in _rewards(env={"KAG_LOAD_PLUGINS": ""})


def test_the_example_imports_kag_only_through_kag_plugin():
    tree = ast.parse((FIXTURE / "kag_example_plugin" / "__init__.py").read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert {m for m in modules if m.split(".")[0] == "kag"} == {"kag.plugin"}


def test_each_of_its_kinds_is_listed_and_runs(example_plugin_installed, tmp_path):
    assert _listed("guard")["no-printf"]["origin"] == "kag-example-plugin 0.1.0"
    assert _listed("tool")["count_lines"]["origin"] == "kag-example-plugin 0.1.0"
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "kernels" / "add.cu").write_text("__global__ void add(float* x) {\n  printf(\"%f\", x[0]);\n}\n")
    code = f"""
from kag.plugin import Plugins, Solution, Task, EvalResult, ToolContext, Reward, StaticGuard, AgentTool
pl = Plugins()
reward, guard, tool = pl.create("reward", "example"), pl.create("guard", "no-printf"), pl.create("tool", "count_lines")
assert isinstance(reward, Reward) and isinstance(guard, StaticGuard) and isinstance(tool, AgentTool)
print("reward", reward(EvalResult(task="t", backend="cpu", compiled=True, correct=True)))
sol = Solution(model_new="", kernels={{"add.cu": open({str(ws / "kernels" / "add.cu")!r}).read()}})
print("guard", [v.detail for v in guard.check_solution(sol, Task(name="t", source="test", code=""))])
handle = pl.create("sandbox", "local").start({str(ws)!r})
ctx = ToolContext.from_sandbox(handle)
print("tool", tool(ctx).text.split())
ctx.close(); handle.close()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["reward"] == "1.0"
    assert lines["guard"] == "['kernels/add.cu: printf in a kernel']"
    assert "3" in lines["tool"] and "kernels/add.cu" in lines["tool"]
