"""Scripted episodes that attack the trust boundary the way an agent would, through its tools.

Each one plants a link (or a FIFO) in its workspace with the bash tool, then asks the trusted
evaluator to compile/verify/profile through the skill scripts. Nothing outside the workspace may
be deleted, written or quoted back, and the reply must name the refused file. Builds use a backend
whose "compiler" copies files (tests/core/fakes.py), so the episodes take about a second each.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from kag.core.agent.loop import Agent, AgentConfig
from kag.core.eval.orchestrator.evaluate import EvalOptions
from kag.core.plugins import Plugins
from kag.core.records import Task, Trajectory, to_dict
from tests.core.fakes import CopyBackendPlugin

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SECRET = "#error host secret 5be2"
ASK = "bash utils/compile.sh; python3 utils/verification.py; python3 utils/profiling.py"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A host folder outside every workspace, as an attacker would like to reach it."""
    folder = tmp_path / "host"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "keep.txt").write_text("keep me")
    (folder / "cuda_extension.so").write_text("a host file named like a module")
    (folder / "secret.cu").write_text(SECRET + "\n")
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() if p.is_file() else "<dir>"
            for p in sorted(folder.rglob("*"))}


def run_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
                commands: list[str]) -> Trajectory:
    """One episode on the copy backend whose turns are these bash commands."""
    monkeypatch.setenv("KAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("kag.core.eval.orchestrator.judge_process.keep_judges_warm", lambda n: None)  # nothing is judged
    temp = Path(tempfile.mkdtemp(prefix="kag-t-"))  # short: the bridge's socket path must fit
    monkeypatch.setattr("tempfile.tempdir", str(temp))  # to see what the episode leaves behind
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    plugins = Plugins(load_entrypoints=False)
    plugins.register_plugin(CopyBackendPlugin(), name="copy-backend")
    policy = plugins.create("policy", "replay",
                            calls=[{"tool": "bash", "args": {"command": c, "timeout": 60}} for c in commands])
    config = AgentConfig(eval_options=EvalOptions(backend="copy", num_timed=1, warmup=0),
                         max_turns=len(commands) + 1)
    path = EXAMPLES / "relu" / "cpu" / "model.py"
    task = Task(name="relu/cpu", source="file", code=path.read_text(), path=str(path))
    traj, _ = Agent(plugins, policy, plugins.create("sandbox"), config, policy_name="replay").run_episode(task)
    # the evaluations' shared root and the GPU pool's lock folder stay (empty); nothing else may
    left = [p for p in temp.iterdir()
            if not (p.name.startswith(("kag-evals-", "kag-locks"))
                    and all(f.suffix in (".lock", ".queue") for f in p.iterdir()))]  # the timing slot's queue too
    assert not left, f"the episode left temp folders behind: {left}"
    return traj


def observations(traj: Trajectory) -> list[str]:
    return [o.content for t in traj.turns for o in t.observations]


def assert_not_quoted(traj: Trajectory) -> None:
    assert "host secret" not in json.dumps(to_dict(traj))


def test_a_linked_build_folder_is_never_written_or_emptied(tmp_path, monkeypatch, request, host):
    before = snapshot(host)
    traj = run_episode(tmp_path, monkeypatch, request, [
        f"rm -rf .kag/build && ln -s {host} .kag/build && bash utils/compile.sh",
        "rm model_new.py"])  # nothing left to score: the episode ends without a judge
    compiled = observations(traj)[0]
    assert "build ok (copy)" in compiled, compiled
    assert snapshot(host) == before  # the trusted build went to a folder of its own


def test_a_kernel_linked_to_a_host_file_is_refused_and_never_quoted(tmp_path, monkeypatch, request, host):
    traj = run_episode(tmp_path, monkeypatch, request, [f"ln -s {host / 'secret.cu'} kernels/x.cu && {ASK}"])
    replies = observations(traj)[0]
    for action in ("compile", "verify", "profile"):
        assert f"{action} refused: kernels/x.cu is a symbolic link: links are not allowed" in replies, replies
    assert_not_quoted(traj)
    assert traj.result is not None and "kernels/x.cu is a symbolic link" in traj.result.error
    assert traj.reward == -1


def test_a_linked_kernels_folder_is_refused(tmp_path, monkeypatch, request, host):
    traj = run_episode(tmp_path, monkeypatch, request, [f"rm -rf kernels && ln -s {host} kernels && {ASK}"])
    replies = observations(traj)[0]
    assert replies.count("refused: kernels is a symbolic link: links are not allowed") == 3, replies
    assert_not_quoted(traj)


def test_a_hard_link_to_a_host_file_is_refused(tmp_path, monkeypatch, request, host):
    traj = run_episode(tmp_path, monkeypatch, request, [f"ln {host / 'secret.cu'} kernels/x.cu && {ASK}"])
    replies = observations(traj)[0]
    if "Invalid cross-device link" in replies:
        pytest.skip(f"the temp folder and {host} are on different file systems")
    if "No such file or directory" in replies:  # the host's /tmp is out of the sandbox's sight: no link at all
        assert_not_quoted(traj)
        return
    assert replies.count("kernels/x.cu has 2 hard links: links are not allowed") == 3, replies
    assert_not_quoted(traj)


def test_a_fifo_in_kernels_is_refused_without_hanging_the_evaluator(tmp_path, monkeypatch, request):
    traj = run_episode(tmp_path, monkeypatch, request, [f"mkfifo kernels/x.cu && {ASK}"])
    replies = observations(traj)[0]
    assert replies.count("kernels/x.cu is not a regular file") == 3, replies



def test_agent_commands_see_no_api_key_and_their_own_home(tmp_path, monkeypatch, request):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-agents")
    monkeypatch.setenv("HOME", str(tmp_path / "host-home"))
    traj = run_episode(tmp_path, monkeypatch, request, ["env; echo HOME=$HOME; touch ~/made-here && echo home-writable",
                                               "rm model_new.py"])
    seen = observations(traj)[0]
    assert "sk-test-not-for-agents" not in seen and "OPENAI_API_KEY" not in seen, seen
    assert f"HOME={tmp_path / 'host-home'}" not in seen and "home-writable" in seen, seen
    assert "KAG_BRIDGE=" in seen and f"PATH={os.environ['PATH']}" in seen


def test_the_evaluator_builds_outside_the_workspace_and_removes_its_folder(tmp_path, monkeypatch):
    from kag.core.agent.episode import EpisodeEvaluator
    from kag.core.agent.workspace import make_workspace

    monkeypatch.setenv("KAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("kag.core.eval.orchestrator.judge_process.keep_judges_warm", lambda n: None)
    plugins = Plugins(load_entrypoints=False)
    plugins.register_plugin(CopyBackendPlugin(), name="copy-backend")
    path = EXAMPLES / "relu" / "cpu" / "model.py"
    task = Task(name="relu/cpu", source="file", code=path.read_text(), path=str(path))
    ws = make_workspace(task, tmp_path / "ws", backend="copy")
    evaluator = EpisodeEvaluator(task, ws, EvalOptions(backend="copy"), plugins)
    reply = evaluator("compile", [])
    assert reply.returncode == 0 and "build ok (copy)" in reply.output, reply.output
    assert list(evaluator.build_dir.glob("cuda_extension*")) and not (ws / ".kag" / "build").exists()
    evaluator.close()
    assert not evaluator.build_dir.exists()
    late = evaluator("compile", [])  # a request still in flight when the episode ends
    assert late.returncode == 2 and "episode has ended" in late.output and not evaluator.build_dir.exists()
