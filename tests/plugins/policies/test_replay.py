"""The replay policy: scripted YAML/JSON tool calls and recorded trajectories."""

from __future__ import annotations

from pathlib import Path

import pytest

from kag.core.plugins import Plugins
from kag.core.agent.policy import PolicyError
from kag.core.records import Message
from kag.core.agent.trajectory import TrajectoryWriter
from tests.core.agent.test_trajectory import make_trajectory

SCRIPT = """
- tool: read
  args: {path: model.py}
- content: Now two calls at once.
  calls:
    - {tool: write, args: {path: model_new.py, content: "x = 1\\n"}}
    - {tool: bash, args: {command: ls}}
- content: All done.
"""


def test_yaml_script_then_stop(tmp_path: Path):
    path = tmp_path / "script.yaml"
    path.write_text(SCRIPT)
    policy = Plugins(load_entrypoints=False).create("policy", "replay", path=str(path))
    msgs = [Message(role="user", content="go")]
    first = policy.act(msgs, [])
    assert [(c.name, c.arguments) for c in first.message.tool_calls] == [("read", {"path": "model.py"})]
    second = policy.act(msgs, [])
    assert [c.name for c in second.message.tool_calls] == ["write", "bash"]
    assert second.message.content == "Now two calls at once."
    assert second.message.tool_calls[0].arguments["content"] == "x = 1\n"
    third = policy.act(msgs, [])
    assert third.done and third.message.content == "All done."
    assert policy.act(msgs, []).done  # exhausted: stays done
    policy.reset()
    assert policy.act(msgs, []).message.tool_calls[0].name == "read"


def test_json_script_and_inline_calls(tmp_path: Path):
    path = tmp_path / "s.json"
    path.write_text('[{"tool": "glob", "args": {"pattern": "*.py"}}]')
    from kag.plugins.policies.replay import ReplayPolicy

    assert ReplayPolicy(path=str(path)).act([], []).message.tool_calls[0].name == "glob"
    assert ReplayPolicy(calls=[{"tool": "todo_write", "args": {"todos": []}}]).remaining == 1


def test_replays_a_recorded_trajectory_with_token_data(tmp_path: Path):
    writer = TrajectoryWriter(tmp_path)
    writer.finish(make_trajectory("ep-a"))
    writer.finish(make_trajectory("ep-b"))
    from kag.plugins.policies.replay import ReplayPolicy

    policy = ReplayPolicy(path=str(writer.path), episode="ep-b")
    step = policy.act([], [])
    assert step.message.tool_calls[0].name == "write"
    assert step.response_token_ids == [5, 6, 7] and step.response_logprobs == [-0.1, -0.2, -0.3]
    assert policy.act([], []).done
    with pytest.raises(PolicyError, match="no episode 'ep-z'"):
        ReplayPolicy(path=str(writer.path), episode="ep-z")


def test_directory_of_task_scripts(tmp_path: Path):
    (tmp_path / "1_Square.yaml").write_text("- tool: read\n  args: {path: model.py}\n")
    from kag.plugins.policies.replay import ReplayPolicy

    policy = ReplayPolicy(path=str(tmp_path))
    policy.reset(task="1_Square")
    assert policy.act([], []).message.tool_calls[0].name == "read"
    with pytest.raises(PolicyError, match="no replay script for task '2_Other'"):
        policy.reset(task="2_Other")


@pytest.mark.parametrize("text, message", [
    ("- {args: {path: x}}", "expected 'tool', 'calls' or 'content'"),
    ("- {tool: read, args: [1]}", "'args' must be a mapping"),
    ("{tool: read}", "a replay script is a list"),
    ("- tool: read\n  args: {path: [unclosed", "not valid YAML"),
])
def test_bad_scripts_name_the_problem(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    from kag.plugins.policies.replay import ReplayPolicy

    with pytest.raises(PolicyError, match=message) as info:
        ReplayPolicy(path=str(path))
    assert "bad.yaml" in str(info.value)
    with pytest.raises(PolicyError, match="does not exist"):
        ReplayPolicy(path=str(tmp_path / "missing.yaml"))
    with pytest.raises(PolicyError, match="needs path=FILE"):
        ReplayPolicy()
