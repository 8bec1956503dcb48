"""A real third-party plugin (examples/plugins/kag-example-plugin, written only against kag.plugin),
pip-installed and discovered through its entry point; each of its kinds runs."""

import ast
import json
import os
import subprocess
import sys


from tests.conftest import run_kag

from tests.cli.conftest import EXAMPLE_PLUGIN as FIXTURE


def _listed(plugin_env, kind, *args, env=None):
    proc = run_kag("plugins", "--json", *args, env={**plugin_env, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return {r["name"]: r for r in json.loads(proc.stdout)["kinds"][kind]}


def _rewards(plugin_env, *args, env=None):
    return _listed(plugin_env, "reward", *args, env=env)


def test_every_kind_has_an_example_listed_as_the_plugins(example_plugin):
    """One plugin of every kind, each listed with the example's distribution and version (and a command)."""
    from kag.plugin import KIND_CONTRACTS

    proc = run_kag("plugins", "--json", env=example_plugin)
    assert proc.returncode == 0, proc.stderr
    kinds = json.loads(proc.stdout)["kinds"]
    without = [k for k in KIND_CONTRACTS if not any(r["origin"] == "kag-example-plugin 0.1.0" for r in kinds[k])]
    assert not without, f"kinds without an example: {without}"
    assert "example-tolerances" in run_kag("--help", env=example_plugin).stdout


def test_entry_point_plugin_is_listed_and_selectable(example_plugin):
    rewards = _rewards(example_plugin)
    assert rewards["example"]["origin"] == "kag-example-plugin 0.1.0"
    assert not rewards["example"]["selected"]
    assert _rewards(example_plugin, "--plugin", "reward=example")["example"]["selected"]


def test_it_is_found_by_entry_point_not_import_path(example_plugin):
    code = ("from kag.core.plugins import Plugins, DEFAULT_PLUGINS\n"
            "assert not any('example' in m for m in DEFAULT_PLUGINS)\n"
            "pl = Plugins(); e = pl.entry('reward', 'example'); print(e.plugin, e.origin)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, **example_plugin}).stdout
    assert out.split() == ["kag-example-plugin:example", "kag-example-plugin", "0.1.0"]


def test_allow_and_block_lists(example_plugin):
    assert "example" not in _rewards(example_plugin, env={"KAG_DISABLE_PLUGINS": "example"})
    assert "example" not in _rewards(example_plugin, env={"KAG_LOAD_PLUGINS": "some-other-plugin"})
    assert "example" in _rewards(example_plugin, env={"KAG_LOAD_PLUGINS": "kag-example-plugin"})
    assert "milestone" in _rewards(example_plugin, env={"KAG_LOAD_PLUGINS": ""})


def test_the_example_imports_kag_only_through_kag_plugin():
    for path in sorted((FIXTURE / "kag_example_plugin").glob("*.py")):
        tree = ast.parse(path.read_text())
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert {m for m in modules if m.split(".")[0] == "kag"} == {"kag.plugin"}, path.name


def test_each_of_its_kinds_is_listed_and_runs(example_plugin, tmp_path):
    assert _listed(example_plugin, "guard")["no-printf"]["origin"] == "kag-example-plugin 0.1.0"
    assert _listed(example_plugin, "tool")["count_lines"]["origin"] == "kag-example-plugin 0.1.0"
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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **example_plugin})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["reward"] == "1.0"
    assert lines["guard"] == "['kernels/add.cu: printf in a kernel']"
    assert "3" in lines["tool"] and "kernels/add.cu" in lines["tool"]
