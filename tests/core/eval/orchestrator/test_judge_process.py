"""Judges kept warm: one is used only in the environment it started in."""

import os
import shutil
import time

import pytest

from kag.core.eval.orchestrator import judge_process
from kag.core.eval.orchestrator.evaluate import EvalOptions, evaluate
from tests.core.eval.orchestrator.test_evaluate import GOOD, TASK_CODE


def _wait_ready(warm, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not warm.count_ready()[1] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert warm.count_ready()[1], "no warm judge imported torch in time"


@pytest.fixture
def warm():
    """The process's warm judges, left as the test found them (wanted count; none left waiting if none were)."""
    warm = judge_process.WARM
    wanted = warm.wanted
    yield warm
    warm.keep(wanted)
    if not wanted:
        while warm.ready:
            warm.ready.pop().close()


def test_a_warm_judge_started_before_the_environment_changed_is_not_used(warm, monkeypatch, tmp_path):
    """A long-lived process (a server, an episode, a test run) keeps a judge started ahead of need;
    when TMPDIR (or the cache, or the lock folder) changes meanwhile, that judge would work in what is
    gone: its candidate found no temporary folder and a right solution failed."""
    from kag.core.records import Task

    gone = tmp_path / "tmp-then-gone"
    gone.mkdir()
    monkeypatch.setenv("TMPDIR", str(gone))
    warm.keep(1)
    _wait_ready(warm)
    stale = warm.ready[0]
    monkeypatch.undo()
    shutil.rmtree(gone)
    task = Task(name="relu_scale", source="file", code=TASK_CODE, path=str(tmp_path / "model.py"))
    result = evaluate(task, GOOD, EvalOptions(backend="cpu", num_timed=3, warmup=1, guards=()))
    assert result.correct and result.error is None, result.error
    assert stale.closed and stale not in warm.ready
    _wait_ready(warm)  # its replacement started here and now: it is the one taken
    fresh = warm.ready[0]
    assert fresh.environment == judge_process.judge_environment()
    assert judge_process.take_judge() is fresh
    fresh.close()
    assert os.environ.get("TMPDIR") != str(gone)


def test_an_episodes_next_request_finds_a_judge_with_torch_imported(warm):
    """An episode asks for verdicts in quick succession (verify, profile, the final score): the
    judge taken for the second must not be the replacement just started for the first (with one kept
    per episode it was, and waited for its torch import)."""
    warm.keep(judge_process.JUDGES_PER_EPISODE)
    deadline = time.monotonic() + 90
    while warm.count_ready()[1] < judge_process.JUDGES_PER_EPISODE and time.monotonic() < deadline:
        time.sleep(0.1)
    first = judge_process.take_judge()  # verify
    second = judge_process.take_judge()  # profile, at once
    assert first.torch_ready() and second.torch_ready()
    first.close()
    second.close()


def test_the_judge_hides_the_configured_precompiled_header_store(monkeypatch, tmp_path):
    """The judge plans its candidate's confinement from its own environment: without KAG_PCH_DIR
    it hid the default header store and left a configured one (headers and their key) readable."""
    import subprocess
    import sys

    store = tmp_path / "site-pch"
    monkeypatch.setenv("KAG_PCH_DIR", str(store))
    code = "from kag.core.eval.orchestrator.build import trusted_stores; print(trusted_stores())"
    out = subprocess.run([sys.executable, "-c", code], env=judge_process.judge_environment(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert str(store) in out.stdout, out.stdout


def test_the_judge_reads_the_timed_childs_priority_from_its_caller(monkeypatch) -> None:
    """``KAG_TIMED_NICE=0`` (the raise off, for an A/B) reaches the judge, which reads it there."""
    import subprocess
    import sys

    monkeypatch.setenv("KAG_TIMED_NICE", "0")
    code = "from kag.core.eval.judge.priority import timed_nice; print(timed_nice())"
    out = subprocess.run([sys.executable, "-c", code], env=judge_process.judge_environment(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"], out.stdout


def test_the_kernel_recorders_switch_reaches_the_judge(monkeypatch) -> None:
    """``KAG_KERNEL_RECORDER=kag`` (kag's CUPTI recorder, for an A/B) is in the judge's environment, and so
    in its children's: an allow-list keeps every other variable out (a first A/B on an H200 switched nothing)."""
    monkeypatch.setenv("KAG_KERNEL_RECORDER", "kag")
    assert judge_process.judge_environment().get("KAG_KERNEL_RECORDER") == "kag"
    monkeypatch.delenv("KAG_KERNEL_RECORDER")
    assert "KAG_KERNEL_RECORDER" not in judge_process.judge_environment()
