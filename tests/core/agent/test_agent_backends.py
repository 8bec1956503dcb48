"""Whole episodes with the other sandbox and policies: docker (real daemon), human (stdin), hf (tiny model)."""

import json
from pathlib import Path

import pytest

from kag.core.agent.loop import Agent, AgentConfig
from kag.core.eval.orchestrator.evaluate import EvalOptions
from kag.core.plugins import Plugins
from kag.core.records import Task
from kag.plugins.sandboxes.docker import docker_problem
from tests.conftest import run_kag

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _task(name: str) -> Task:
    path = EXAMPLES / name / "cpu" / "model.py"
    return Task(name=f"{name}/cpu", source="file", code=path.read_text(), path=str(path))


def _config(**kw) -> AgentConfig:
    return AgentConfig(eval_options=EvalOptions(backend="cpu", num_timed=5, warmup=1), **kw)


@pytest.mark.docker
@pytest.mark.slow  # 98 s in CI; an honest docker episode rewarded: tests/plugins/sandboxes/test_docker_eval.py
@pytest.mark.skipif(docker_problem() is not None, reason=f"docker sandbox unavailable: {docker_problem()}")
def test_episode_in_the_docker_sandbox_reaches_the_evaluator_through_the_bridge():
    plugins = Plugins(load_entrypoints=False)
    policy = plugins.create("policy", "replay", path=str(EXAMPLES / "relu" / "cpu" / "replay.json"))
    agent = Agent(plugins, policy, plugins.create("sandbox", "docker"), _config(), policy_name="replay")
    traj, _ = agent.run_episode(_task("relu"))
    outputs = [o.content for t in traj.turns for o in t.observations]
    assert any("build ok" in o for o in outputs), outputs
    assert any("PASS" in o for o in outputs), outputs
    assert traj.result is not None and traj.result.ok and traj.reward >= 1


@pytest.mark.slow  # 31 s in CI; a person's whole episode runs there in a real terminal (tests/cli/test_human_terminal.py)
def test_a_person_completes_an_episode_through_the_human_policy(tmp_path):
    solution = EXAMPLES / "sigmoid" / "cpu"
    lines = ['read {"path": "model_new.py"}']
    for kernel in sorted((solution / "kernels").iterdir()):
        lines.append("write " + json.dumps({"path": f"kernels/{kernel.name}", "content": kernel.read_text()}))
    lines.append("write " + json.dumps({"path": "model_new.py", "content": (solution / "model_new.py").read_text()}))
    lines += ['bash {"command": "python3 utils/verification.py"}', "done"]
    proc = run_kag("run", "--task", str(solution / "model.py"), "--backend", "cpu", "--policy", "human",
                   "--num-timed", "5", "--out", str(tmp_path / "out"), input="\n".join(lines) + "\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "correct: True" in proc.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["reward"] >= 1 and summary["turns"] == 6


@pytest.mark.slow
def test_hf_policy_with_a_tiny_local_model_runs_an_episode_without_breaking(tmp_path):
    from kag.plugins.algorithms.ppo.tiny import make_tiny

    model, tokenizer = make_tiny(seed=0)
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    plugins = Plugins(load_entrypoints=False)
    policy = plugins.create("policy", "hf", model=str(tmp_path / "tiny"), device="cpu", max_new_tokens=32)
    agent = Agent(plugins, policy, plugins.create("sandbox"), _config(max_turns=3), policy_name="hf")
    traj, _ = agent.run_episode(_task("relu"))
    assert traj.stop_reason in ("model_stopped", "turn_budget", "context_budget")
    assert traj.turns and traj.turns[0].response_token_ids and traj.turns[0].response_logprobs
    assert traj.result is not None and traj.reward == -1  # its actions are poor; the loop still ends cleanly
