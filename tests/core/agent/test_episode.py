"""The one Episode both drivers use: tool calls in, verdicts drained per turn, one final re-score, no leftovers."""

from __future__ import annotations

from pathlib import Path

import pytest

from kag.core.agent.episode import Episode
from kag.core.eval.orchestrator.evaluate import EvalOptions
from kag.core.plugins import Plugins
from kag.core.records import Task, ToolCall
from kag.core.agent.toolkit import build_tools
from tests.core.fakes import CopyBackendPlugin

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture
def parts(tmp_path, monkeypatch):
    monkeypatch.setenv("KAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("kag.core.eval.orchestrator.judge_process.keep_judges_warm", lambda n: None)  # nothing is judged
    plugins = Plugins(load_entrypoints=False)
    plugins.register_plugin(CopyBackendPlugin(), name="copy-backend")
    path = EXAMPLES / "relu" / "cpu" / "model.py"
    task = Task(name="relu/cpu", source="file", code=path.read_text(), path=str(path))
    options = EvalOptions(backend="copy", num_timed=1, warmup=0)
    return task, plugins.create("sandbox"), build_tools(plugins), options, plugins


def bash(command: str) -> ToolCall:
    return ToolCall(id="c", name="bash", arguments={"command": command, "timeout": 60})


def test_an_episode_runs_calls_answers_the_bridge_and_ends_with_its_failure_verdict(parts):
    with Episode(*parts) as episode:
        root = episode.ctx.root
        compiled = episode.call(bash("bash utils/compile.sh"))
        assert "build ok (copy)" in compiled.message.content and not compiled.is_error, compiled
        assert compiled.message.role == "tool" and episode.drain() == []  # a build is no verdict
        assert episode.call(ToolCall(id="u", name="launch_rocket")).is_error
        episode.call(bash("rm model_new.py"))  # nothing left to score: no judge runs
        solution, result = episode.finish()
        assert solution is None and episode.solution_from == ""
        assert result.error.startswith("no solution to score") and result.reward.value == -1
        assert episode.ctx is None and not root.exists() and not episode.tmp.exists()


def test_leaving_the_episode_early_closes_it(parts):
    with pytest.raises(RuntimeError, match="policy fell over"):
        with Episode(*parts) as episode:
            root, bridge = episode.ctx.root, episode.bridge
            raise RuntimeError("policy fell over")
    assert not root.exists() and not episode.tmp.exists() and not bridge.socket_path.exists()
