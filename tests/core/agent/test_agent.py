"""Real episodes on the CPU backend: replay policy, local sandbox, trusted evaluator, reward."""

import json
from pathlib import Path

import pytest

from kag.core.agent.loop import Agent, AgentConfig
from kag.core.eval.orchestrator.evaluate import EvalOptions
from kag.core.plugins import Plugins
from kag.core.records import Task
from kag.core.agent.trajectory import TrajectoryWriter, load_turns

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _task(name: str) -> Task:
    path = EXAMPLES / name / "cpu" / "model.py"
    return Task(name=f"{name}/cpu", source="file", code=path.read_text(), path=str(path))


def _agent(plugins, policy, tmp_path, **cfg) -> Agent:
    config = AgentConfig(eval_options=EvalOptions(backend="cpu", num_timed=5, warmup=1), **cfg)
    return Agent(plugins, policy, plugins.create("sandbox"), config, writer=TrajectoryWriter(tmp_path),
                 policy_name="replay")


def test_replayed_episode_compiles_verifies_profiles_and_is_rewarded(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    policy = plugins.create("policy", "replay", path=str(EXAMPLES / "relu" / "cpu" / "replay.json"))
    traj, solution = _agent(plugins, policy, tmp_path).run_episode(_task("relu"))
    assert traj.stop_reason == "model_stopped"
    assert traj.result is not None and traj.result.ok, traj.result
    assert traj.reward is not None and traj.reward >= 1
    assert "relu_forward" in solution.model_new
    outputs = [o.content for t in traj.turns for o in t.observations]
    assert any("build ok" in o for o in outputs)
    assert any("PASS" in o and "correct: True" in o for o in outputs)
    recorded = [r for t in traj.turns for r in t.eval_results]
    assert len(recorded) == 2 and all(r.ok for r in recorded)  # verify + profile
    assert recorded[1].times_ms.get("candidate")
    # each turn was appended as it happened, and the episode line at the end
    assert len(load_turns(tmp_path / "episodes" / f"{traj.episode_id}.turns.jsonl")) == len(traj.turns)
    assert json.loads((tmp_path / "trajectories.jsonl").read_text())["reward"] == traj.reward


def test_bad_tool_calls_are_observations_and_budgets_stop_the_loop(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    calls = [{"tool": "no_such_tool", "args": {}},
             {"tool": "write", "args": {"path": "model.py", "content": "hacked"}},
             {"tool": "bash", "args": {"command": "echo still here"}},
             {"tool": "bash", "args": {"command": "echo never reached"}}]
    policy = plugins.create("policy", "replay", calls=calls)
    traj, _ = _agent(plugins, policy, tmp_path, max_turns=3).run_episode(_task("relu"))
    assert traj.stop_reason == "turn_budget" and len(traj.turns) == 3
    obs = [t.observations[0].content for t in traj.turns]
    assert "unknown tool 'no_such_tool'" in obs[0]
    assert "protected" in obs[1]
    assert "still here" in obs[2]
    # the starter model_new.py is not a solution: the episode fails, it does not crash
    assert traj.result is not None and not traj.result.ok and traj.reward == -1
