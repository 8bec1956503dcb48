"""Trajectory JSONL: turns appended as they happen, episodes as they end, torn lines repaired."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from kag.core.records import EvalResult, Message, ToolCall, Trajectory, Turn
from kag.core.agent.trajectory import TrajectoryWriter, load_trajectories, load_turns, render_transcript


def make_trajectory(episode_id: str = "ep-1") -> Trajectory:
    call = ToolCall(id="c1", name="write", arguments={"path": "model_new.py", "content": "print(1)\n"})
    turn = Turn(index=0, response=Message(role="assistant", content="Writing the model.", tool_calls=[call]),
                observations=[Message(role="tool", content="created model_new.py", tool_call_id="c1", name="write")],
                response_token_ids=[5, 6, 7], response_logprobs=[-0.1, -0.2, -0.3],
                eval_results=[EvalResult(task="t", backend="cpu", compiled=True, correct=True, speedup_vs_eager=1.5)],
                usage={"prompt_tokens": 10, "completion_tokens": 3}, elapsed_s=0.5)
    return Trajectory(episode_id=episode_id, task="t", turns=[turn], reward=2.0, stop_reason="model_done",
                      policy="replay", kag_version="0.1.0",
                      messages=[Message(role="system", content="You optimise kernels."),
                                Message(role="user", content="Make Model faster."), turn.response, *turn.observations],
                      result=turn.eval_results[0])


def test_round_trip_and_layout(tmp_path: Path):
    writer = TrajectoryWriter(tmp_path)
    traj = make_trajectory()
    for turn in traj.turns:
        writer.append_turn(traj.episode_id, turn)
    assert load_turns(tmp_path / "episodes" / "ep-1.turns.jsonl") == traj.turns
    assert writer.finished_ids() == set()
    writer.finish(traj)
    writer.finish(make_trajectory("ep-2"))
    loaded = load_trajectories(tmp_path)
    assert [t.episode_id for t in loaded] == ["ep-1", "ep-2"]
    assert loaded[0] == traj
    assert load_trajectories(tmp_path / "trajectories.jsonl") == loaded
    assert writer.finished_ids() == {"ep-1", "ep-2"}


def test_torn_last_line_is_ignored_and_repaired(tmp_path: Path):
    writer = TrajectoryWriter(tmp_path)
    writer.finish(make_trajectory("ep-1"))
    with open(writer.path, "a") as fh:  # a run killed mid-write
        fh.write(json.dumps({"episode_id": "ep-2"})[:10])
    assert [t.episode_id for t in load_trajectories(tmp_path)] == ["ep-1"]
    writer.finish(make_trajectory("ep-3"))
    assert [t.episode_id for t in load_trajectories(tmp_path)] == ["ep-1", "ep-3"]
    assert writer.path.read_text().count("\n") == 2


def test_bad_lines_name_the_file_and_line(tmp_path: Path):
    path = tmp_path / "trajectories.jsonl"
    path.write_text('{"episode_id": "a", "task": "t"}\nnot json\n{"episode_id": "b", "task": "t"}\n')
    with pytest.raises(ValueError, match=r"trajectories.jsonl:2: not valid JSON"):
        load_trajectories(path)
    path.write_text('{"episode_id": "a", "task": "t", "colour": "red"}\n')
    with pytest.raises(ValueError, match=r":1: not a Trajectory record.*colour"):
        load_trajectories(path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_trajectories(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="cannot be used as a file name"):
        TrajectoryWriter(tmp_path).append_turn("../x", make_trajectory().turns[0])


def _write_many(out_dir: str, worker: int) -> None:
    writer = TrajectoryWriter(out_dir)
    for i in range(20):
        writer.finish(make_trajectory(f"w{worker}-{i}"))


def test_concurrent_processes_keep_lines_whole(tmp_path: Path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_many, args=(str(tmp_path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert len(load_trajectories(tmp_path)) == 80


def test_transcript_is_readable():
    text = render_transcript(make_trajectory())
    assert text.splitlines()[0].startswith("episode ep-1 · task t · policy replay · 1 turns · stop: model_done")
    for piece in ("SYSTEM", "You optimise kernels.", "USER", "══ turn 0", "→ write(", '"path": "model_new.py"',
                  "TOOL RESULT [write]", "created model_new.py", "vs eager 1.50x", "3 response tokens", "reward: 2.0"):
        assert piece in text, piece
    assert text.count("Make Model faster.") == 1 and text.count("created model_new.py") == 1
    long = make_trajectory()
    long.turns[0].observations[0].content = "x" * 10_000
    assert "more characters" in render_transcript(long, max_chars=100)
