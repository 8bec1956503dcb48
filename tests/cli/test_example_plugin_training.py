"""The example plugin's training kinds (kag_example_plugin/training.py), pip-installed and found through
its entry point: each is listed as the plugin's, and each runs; the algorithm as a user runs it,
``kag train example-best-of-n --config FILE``."""

import csv
import json

from tests.cli.conftest import run_with_plugin
from tests.conftest import run_kag


def test_environment_policy_and_logger_run(example_plugin, tmp_path):
    code = f"""
import json, random
from kag.plugin import Environment, MetricSink, Plugins, Policy, as_step_result
pl = Plugins()
env, policy = pl.create("environment", "example-echo", words=["warp", "grid"]), pl.create("policy", "example-parrot")
fixed = pl.create("policy", "example-parrot", answer="warp")
sink = pl.create("logger", "example-csv", out_dir={str(tmp_path / "out")!r}, stage="s", config={{}})
assert isinstance(env, Environment) and isinstance(policy, Policy) and isinstance(sink, MetricSink)
tasks = env.sample_tasks(50, random.Random(0))
rows = {{}}
for task in ("grid", "warp"):
    prompt = env.reset(task)
    said = policy.act(prompt, []).message.content
    parrot = as_step_result(env.step(said))
    env.reset(task)
    fixed_reward = as_step_result(env.step(fixed.act(prompt, []).message.content)).reward
    rows[task] = [prompt[-1].content, said, parrot.reward, parrot.done, fixed_reward]
env.reset("grid")
rows["case"] = as_step_result(env.step("  GRID ")).reward
try:
    env.step("grid")
    rows["twice"] = "no error"
except RuntimeError:
    rows["twice"] = "refused"
sink.log(1, {{"reward": 0.5, "best": 1.0}})
sink.log(2, {{"reward": 0.25}})
sink.close()
print(json.dumps({{"tasks": sorted(set(tasks)), "rows": rows}}))
"""
    got = json.loads(run_with_plugin(code, example_plugin))
    assert got["tasks"] == ["grid", "warp"]
    assert got["rows"]["grid"] == ["say grid", "grid", 1.0, True, 0.0]
    assert got["rows"]["warp"] == ["say warp", "warp", 1.0, True, 1.0]
    assert got["rows"]["case"] == 1.0
    assert got["rows"]["twice"] == "refused"
    with open(tmp_path / "out" / "metrics.csv", newline="") as f:
        assert list(csv.reader(f)) == [["step", "metric", "value"], ["1", "reward", "0.5"], ["1", "best", "1.0"],
                                       ["2", "reward", "0.25"]]


CONFIG = """
[plugins]
policy = "example-parrot"

[policies.example-parrot]
{answer}

[environments.example-echo]
words = ["warp", "grid", "block"]

[train]
seed = 3
loggers = ["example-csv"]

[train.example-best-of-n]
environment = "example-echo"
tasks = 4
n = 2
output_dir = "{out}"
"""


def test_best_of_n_runs_from_a_train_config(example_plugin, tmp_path):
    for name, answer in (("echo", ""), ("fixed", 'answer = "warp"')):
        (tmp_path / f"{name}.toml").write_text(CONFIG.format(answer=answer, out=tmp_path / name))
    got = {}
    for name in ("echo", "fixed"):  # as a user runs it: a plugin's algorithm is a `kag train` stage
        proc = run_kag("train", "example-best-of-n", "--config", f"{name}.toml", "--set", "tasks=30",
                       env=example_plugin, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        got[name] = json.loads(proc.stdout)
    typo = run_kag("train", "example-best-of-n", "--config", "echo.toml", "--set", "taks=3", env=example_plugin,
                   cwd=tmp_path)
    assert typo.returncode != 0
    got["typo"] = typo.stderr
    echo, fixed = got["echo"], got["fixed"]
    assert echo == {"stage": "example-best-of-n", "environment": "example-echo", "policy": "example-parrot",
                    "tasks": 30, "n": 2, "mean_reward": 1.0, "best_of_n": 1.0, "output_dir": str(tmp_path / "echo")}
    assert 0.0 < fixed["mean_reward"] < 1.0  # "warp" is one word of three: right on some tasks only
    assert fixed["best_of_n"] == fixed["mean_reward"]  # the parrot answers the same each time
    with open(tmp_path / "fixed" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    rewards = [float(r["value"]) for r in rows if r["metric"] == "reward"]
    assert [int(r["step"]) for r in rows if r["metric"] == "reward"] == list(range(1, 31))
    assert set(rewards) == {0.0, 1.0} and sum(rewards) / 30 == fixed["mean_reward"]
    assert "taks" in got["typo"] and "echo.toml" in got["typo"]
