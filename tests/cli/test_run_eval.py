"""`kag run` and `kag eval` end to end on the CPU backend, including a kill and a resume."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import default_sigint, run_kag

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _dataset(tmp_path: Path) -> tuple[Path, Path]:
    tasks, replays = tmp_path / "tasks", tmp_path / "replays"
    tasks.mkdir()
    replays.mkdir()
    for name in ("relu", "sigmoid", "tanh"):
        shutil.copy(EXAMPLES / name / "cpu" / "model.py", tasks / f"{name}.py")
    for name in ("relu", "sigmoid"):  # tanh has no script: its episode fails, the run goes on
        _replay_without_checks(name, replays / f"{name}.json")
    return tasks, replays


def _replay_without_checks(name: str, dest: Path,
                           drop: tuple[str, ...] = ("utils/verification.py", "utils/profiling.py")) -> Path:
    """The example's script without its verification and profiling turns (each an evaluation, as the
    episode's end is): these tests are of the run around the episodes, which end in the same verdict."""
    turns = json.loads((EXAMPLES / name / "cpu" / "replay.json").read_text())
    kept = [t for t in turns if not (isinstance(t, dict) and t.get("tool") == "bash"
                                     and any(s in str(t.get("args", {}).get("command", "")) for s in drop))]
    assert len(kept) == len(turns) - len(drop), f"{name}'s replay changed shape"
    dest.write_text(json.dumps(kept))
    return dest


def _eval_args(tasks: Path, replays: Path, out: Path) -> list[str]:
    return ["eval", "--dataset", f"local:{tasks}", "--policy", "replay", "--policy-option", f"path={replays}",
            "--backend", "cpu", "--num-timed", "5", "--out", str(out)]


def test_kag_eval_summarises_and_resumes_after_a_kill(tmp_path):
    tasks, replays = _dataset(tmp_path)
    out = tmp_path / "out"
    results = out / "results.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "kag.cli.main", *_eval_args(tasks, replays, out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if results.exists() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.5)
    killed_with = results.read_text().count("\n") if results.exists() else 0
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert 1 <= killed_with < 3

    again = run_kag(*_eval_args(tasks, replays, out))
    assert again.returncode == 0, again.stderr
    assert f"({killed_with} already done)" in again.stderr
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["task"] for r in rows) == ["relu", "sigmoid", "tanh"]
    by_task = {r["task"]: r for r in rows}
    assert by_task["relu"]["result"]["correct"] and by_task["sigmoid"]["result"]["correct"]
    assert "policy_error" in by_task["tanh"]["stop_reason"] and by_task["tanh"]["reward"] == -1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 3 and summary["overall"]["passed"] == 2
    assert abs(summary["overall"]["pass_rate"] - 2 / 3) < 1e-9
    assert (out / "fast_p.png").stat().st_size > 1000
    assert "| overall | 3 |" in (out / "summary.md").read_text()


def _group_alive(pgid: int) -> list[str]:
    """Processes still in the process group (not zombies), as 'pid command'."""
    alive = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    alive.append(f"{entry} {stat.split('(', 1)[1].split(')', 1)[0]}")
            except (OSError, ValueError, IndexError):
                continue
    return alive


def _scratch_left(tmp: Path) -> list[str]:
    """kag's scratch folders left in a private TMPDIR: workspaces, homes, bridges, episode, build,
    candidate and output folders (kag-evals-UID and kag-locks are kept on purpose: shared roots)."""
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("kag-")
                  and not p.name.startswith(("kag-evals-", "kag-locks")))


def _private_tmp() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="kt", dir="/tmp"))  # short: sockets are made under it


@pytest.mark.slow  # 28 s: CI keeps the kill-and-resume test of kag eval
def test_ctrl_c_stops_kag_eval_and_records_only_finished_episodes(tmp_path):
    """SIGINT to the process group, as a terminal sends it, while an episode is in flight: nothing
    of the episode is left in the temp folder (its workspace, its judge's folders). That a rerun
    resumes from the finished episodes is test_kag_eval_summarises_and_resumes_after_a_kill's (the
    harder case: a SIGKILL leaves kag no moment to save anything)."""
    tasks, replays = _dataset(tmp_path)
    _replay_without_checks("tanh", replays / "tanh.json")  # every episode can pass
    out = tmp_path / "out"
    results = out / "results.jsonl"
    scratch = _private_tmp()
    proc = subprocess.Popen([sys.executable, "-m", "kag.cli.main", *_eval_args(tasks, replays, out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_sigint,
                            env=dict(os.environ, TMPDIR=str(scratch)))
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if results.exists() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    time.sleep(3)  # the next episode is under way
    finished = results.read_text().count("\n")
    assert proc.poll() is None and finished < 3, "the run ended before it could be interrupted"
    t0 = time.time()
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert time.time() - t0 < 60  # the episode in flight was cancelled, not waited for
    assert "Traceback" not in stderr and "interrupted" in stderr and "resumes" in stderr
    time.sleep(1)
    assert _group_alive(proc.pid) == []  # judges, candidates, sandboxed commands: all gone
    assert _scratch_left(scratch) == [], stderr[-2000:]
    shutil.rmtree(scratch, ignore_errors=True)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == finished >= 1 and all(r["reward"] >= 1 for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["tasks"] == finished and summary["overall"]["pass_rate"] == 1.0


def test_ctrl_c_in_kag_run_leaves_no_workspace_and_names_only_files_that_exist(tmp_path):
    """SIGINT mid-episode (after the first turn's tool calls are under way): exit 130 at once, the
    processes and the episode's scratch folders gone, the turns played kept in OUT."""
    out = tmp_path / "run"
    scratch = _private_tmp()
    proc = subprocess.Popen([sys.executable, "-m", "kag.cli.main", "run", "--task",
                             str(EXAMPLES / "sigmoid" / "cpu" / "model.py"), "--backend", "cpu", "--policy", "replay",
                             "--policy-option", f"path={EXAMPLES / 'sigmoid' / 'cpu' / 'replay.json'}",
                             "--num-timed", "5", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_sigint,
                            env=dict(os.environ, TMPDIR=str(scratch)))
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not any(
            p.name.startswith("kag-ws-") for p in scratch.iterdir()):
        time.sleep(0.1)
    time.sleep(2)  # the episode's tools are running
    assert proc.poll() is None, "the episode ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "interrupted" in stderr, stderr[-3000:]
    time.sleep(1)
    assert _group_alive(proc.pid) == []
    assert _scratch_left(scratch) == [], stderr[-2000:]
    for named in re.findall(r"(?:^|[\s'\"(])(/[^\s'\"]+)", stdout + stderr, re.M):  # every path a message names exists
        assert Path(named.rstrip(".,;:)")).exists() or named.startswith(str(EXAMPLES)), named
    shutil.rmtree(scratch, ignore_errors=True)


def test_kag_run_exits_one_when_the_episode_leaves_no_passing_solution(tmp_path):
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps([{"content": "I will not write a kernel."}]))
    out = tmp_path / "run"
    proc = run_kag("run", "--task", str(EXAMPLES / "sigmoid" / "cpu" / "model.py"), "--backend", "cpu",
                   "--policy", "replay", "--policy-option", f"path={replay}", "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reward"] == -1 and summary["turns"] == 1


def _on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run the real kag with stderr on a pseudo-terminal (as a person at a shell has it)."""
    import pty
    import re
    import select

    main, side = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "kag.cli.main", *args], stdin=side, stdout=subprocess.DEVNULL,
                            stderr=side, cwd=cwd)
    os.close(side)
    buf = b""
    while True:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                data = os.read(main, 4096)
            except OSError:
                break
            if not data:
                break
            buf += data
        elif proc.poll() is not None:
            break
    os.close(main)
    return proc.wait(), re.sub(rb"\x1b\[[0-9;?]*[a-zA-Z]", b"", buf).decode(errors="replace")


@pytest.mark.slow  # 47 s on 2 cores; the line-per-phase output off a terminal runs in CI
def test_long_commands_show_progress_on_a_terminal_and_not_when_quiet(tmp_path):
    """Also: kag run leaves the best solution and a summary in OUT."""
    replay = _replay_without_checks("sigmoid", tmp_path / "replay.json", drop=("utils/profiling.py",))
    args = ["run", "--task", str(EXAMPLES / "sigmoid" / "cpu" / "model.py"), "--backend", "cpu", "--policy", "replay",
            "--policy-option", f"path={replay}", "--num-timed", "5", "--out", str(tmp_path / "run")]
    code, err = _on_a_terminal(args, tmp_path)
    assert code == 0, err[-2000:]
    assert "turn 2: write kernels/sigmoid.cpp" in err and "; PASS" in err  # a line per turn, verdicts in it
    out = tmp_path / "run"  # kag run leaves the best solution and a summary
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == "sigmoid/cpu" and summary["reward"] >= 1
    assert summary["result"]["correct"] and summary["stop_reason"] == "model_stopped"
    assert (out / "workspace" / "kernels").is_dir() and (out / "workspace" / "model.py").exists()
    assert "sigmoid" in (out / "workspace" / "model_new.py").read_text()
    shown = run_kag("show", str(out / "trajectories.jsonl"))
    assert shown.returncode == 0 and "utils/verification.py" in shown.stdout
    code, err = _on_a_terminal(["verify", "--workspace", str(tmp_path / "run" / "workspace"), "--num-checks", "2"],
                               tmp_path)
    assert code == 0 and "kag verify: " in err and "checking 2 inputs" in err  # the judge's phases
    code, err = _on_a_terminal(["verify", "--workspace", str(tmp_path / "run" / "workspace"), "--num-checks", "2",
                                "--quiet"], tmp_path)
    assert code == 0 and "checking 2 inputs" not in err and "turn " not in err
    cfg = tmp_path / "train.toml"
    cfg.write_text(f'[train]\nmodel = "tiny"\nmax_new_tokens = 2\nepisodes_per_step = 2\nmini_batch_size = 2\n'
                   f'tensorboard = false\n[train.warmup]\noutput_dir = "{tmp_path / "w"}"\n')
    code, err = _on_a_terminal(["train", "warmup", "--config", str(cfg), "--set", "steps=2"], tmp_path)
    assert code == 0 and "warmup 1/2 reward=" in err and "warmup 2/2 reward=" in err  # a line per step
    assert " kl=" in err and " clip=" in err and " tok/s=" in err


def test_verbose_prints_every_process_phase_marks_through_logging():
    example = EXAMPLES / "relu" / "cpu"
    proc = run_kag("-v", "verify", "--task", str(example / "model.py"), "--solution", str(example), "--backend", "cpu",
                   "--num-checks", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    marks = [line for line in proc.stderr.splitlines() if line.startswith("[kag-trace] ")]
    assert any(" orchestrator[" in m for m in marks) and any(" judge[" in m and "checks done" in m for m in marks)
    quiet = run_kag("verify", "--task", str(example / "model.py"), "--solution", str(example), "--backend", "cpu",
                    "--num-checks", "1", env={"KAG_TRACE": ""})
    assert quiet.returncode == 0 and "[kag-trace]" not in quiet.stderr


def test_off_a_terminal_long_commands_print_a_line_per_turn_episode_and_phase_and_count_tool_failures(tmp_path):
    """A log file or CI sees progress too; a command that timed out and one that failed are counted
    in the turn's line, kag run's summary and kag eval's table, whatever the verdict."""
    replay = tmp_path / "replays" / "sigmoid.json"
    replay.parent.mkdir()
    replay.write_text(json.dumps([{"tool": "bash", "args": {"command": "sleep 30", "timeout": 1}},
                                  {"tool": "bash", "args": {"command": "exit 3"}},
                                  {"content": "done"}]))
    task = EXAMPLES / "sigmoid" / "cpu" / "model.py"
    out = tmp_path / "run"
    proc = run_kag("run", "--task", str(task), "--backend", "cpu", "--policy", "replay", "--policy-option",
                   f"path={replay}", "--out", str(out))  # stderr is a pipe here
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert re.search(r"turn 1: bash; 1 failed \(1 timed out\) \(\d+\.\d s\)", proc.stderr), proc.stderr
    assert re.search(r"turn 2: bash; 1 failed \(\d+\.\d s\)", proc.stderr), proc.stderr
    assert "3 turns, stopped: model_stopped; 2 tool calls, 2 failed (1 timed out)" in proc.stdout
    assert json.loads((out / "summary.json").read_text())["tools"] == {"calls": 2, "errors": 2, "timeouts": 1}
    quiet = run_kag("run", "--task", str(task), "--backend", "cpu", "--policy", "replay", "--policy-option",
                    f"path={replay}", "--out", str(tmp_path / "quiet"), "--quiet")
    assert "turn 1" not in quiet.stderr

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copy(task, tasks / "sigmoid.py")
    ev = run_kag("eval", "--dataset", f"local:{tasks}", "--policy", "replay", "--policy-option",
                 f"path={replay.parent}", "--backend", "cpu", "--out", str(tmp_path / "ev"))
    assert ev.returncode == 0, ev.stderr[-2000:]
    assert re.search(r"kag eval: 1/1 sigmoid: FAIL \(\w+\), reward -1(\.0)?; 2 tool calls, 2 failed \(1 timed out\) "
                     r"\(\d+ s\)", ev.stderr), ev.stderr
    row = json.loads((tmp_path / "ev" / "results.jsonl").read_text().splitlines()[0])
    assert row["tools"] == {"calls": 2, "errors": 2, "timeouts": 1}
    assert "| tool calls (failed, timed out) |" in ev.stdout and "| 2 (2, 1) |" in ev.stdout

    example = EXAMPLES / "relu" / "cpu"
    verify = run_kag("verify", "--task", str(example / "model.py"), "--solution", str(example), "--backend", "cpu",
                     "--num-checks", "2")
    assert verify.returncode == 0, verify.stderr[-2000:]
    assert re.search(r"^kag verify: \S+ \(0 s\)$", verify.stderr, re.M), verify.stderr  # the judge's phases, a line each
    assert re.search(r"checking 2 inputs \(\d+ s\)$", verify.stderr, re.M), verify.stderr


def test_training_off_a_terminal_prints_its_first_and_last_steps_and_one_per_30_s(tmp_path):
    cfg = tmp_path / "train.toml"
    cfg.write_text(f'[train]\nmodel = "tiny"\nmax_new_tokens = 2\nepisodes_per_step = 2\nmini_batch_size = 2\n'
                   f'tensorboard = false\n[train.warmup]\noutput_dir = "{tmp_path / "w"}"\n')
    proc = run_kag("train", "warmup", "--config", str(cfg), "--set", "steps=3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("warmup ")]
    assert [line.split()[1] for line in lines] == ["1/3", "3/3"], proc.stderr  # step 2 came within 30 s of step 1
