"""The persistent bash session, timeouts and background jobs, through a real local sandbox."""

from __future__ import annotations

import time

from kag.plugins.tools.bash import BashTool


def test_state_persists_between_commands(ctx, tools):
    bash = tools["bash"]
    assert bash(ctx, command="pwd").text == str(ctx.root)
    assert not bash(ctx, command="mkdir -p build/x && cd build/x && export KAG_T=42 && f() { echo fn; }").is_error
    out = bash(ctx, command="pwd; echo $KAG_T; f")
    assert out.text.splitlines() == [str(ctx.root / "build/x"), "42", "fn"]


def test_exit_codes_stderr_and_syntax_errors(ctx, tools):
    bash = tools["bash"]
    out = bash(ctx, command="echo out; echo err >&2; exit_status() { return 3; }; exit_status")
    assert out.is_error and "out" in out.text and "err" in out.text and "[exit code 3]" in out.text
    bad = bash(ctx, command="echo 'unclosed")
    assert bad.is_error and "[exit code 2]" in bad.text
    assert bash(ctx, command="echo still alive").text == "still alive"  # the session survived
    assert bash(ctx, command="cat").text == "(no output)"  # stdin is not the session's pipe
    assert bash(ctx, command="printf 'a\\nb'").text == "a\nb"


def test_exit_restarts_the_session_in_the_same_directory(ctx, tools):
    bash = tools["bash"]
    bash(ctx, command="cd kernels")
    out = bash(ctx, command="exit 4")
    assert out.is_error and "new session" in out.text
    assert bash(ctx, command="pwd").text == str(ctx.root / "kernels")


def test_timeout_kills_the_command_and_keeps_working(ctx, tools):
    bash = tools["bash"]
    bash(ctx, command="cd kernels")
    start = time.monotonic()
    out = bash(ctx, command="echo before; sleep 30; echo AFTER", timeout=1)
    assert time.monotonic() - start < 10
    assert out.is_error and "timed out after 1 s" in out.text and "before" in out.text and "AFTER" not in out.text
    assert bash(ctx, command="pwd").text == str(ctx.root / "kernels")


def test_long_output_is_truncated_with_a_note(ctx):
    bash = BashTool(max_output_chars=1000)
    out = bash(ctx, command="seq 1 100000")
    assert len(out.text) < 1300
    assert out.text.startswith("1\n2\n") and out.text.rstrip().endswith("100000")
    assert "characters omitted" in out.text and "budget of bash" in out.text


def test_background_jobs(ctx, tools):
    bash, output, kill = tools["bash"], tools["bash_output"], tools["kill_bash"]
    bash(ctx, command="cd kernels")
    started = bash(ctx, command="pwd; for i in 1 2 3; do echo tick$i; sleep 0.2; done", run_in_background=True)
    job = started.metadata["job_id"]
    assert not started.is_error and job in started.text
    deadline = time.monotonic() + 20
    seen = ""
    while time.monotonic() < deadline:
        res = output(ctx, job_id=job)
        seen += res.text
        if "exited with code 0" in res.text:
            break
        time.sleep(0.2)
    assert "tick1" in seen and "tick3" in seen and str(ctx.root / "kernels") in seen
    assert "no new output" in output(ctx, job_id=job).text  # output is shown once

    sleeper = bash(ctx, command="sleep 60", run_in_background=True).metadata["job_id"]
    assert "running" in output(ctx, job_id=sleeper).text
    assert "killed" in kill(ctx, job_id=sleeper).text
    assert "exited" in output(ctx, job_id=sleeper).text
    missing = output(ctx, job_id="job99")
    assert missing.is_error and "no background job" in missing.text


def test_close_kills_background_jobs(ctx, tools):
    res = tools["bash"](ctx, command="sleep 60", run_in_background=True)
    proc = ctx.state["bash_jobs"][res.metadata["job_id"]].proc
    ctx.close()
    assert proc.wait(timeout=10) is not None
