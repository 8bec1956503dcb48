"""The judge's side of its signalling with a child (kag.core.eval.judge.candidate_process), driven directly:
an answer must echo the call it answers and stay bounded, and a stopped child runs nothing until it is
resumed. The whole window protocol runs in tests/core/eval/judge/test_windows.py."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time

import pytest

from kag.core.eval.boundary import COUNT, OP_CALL, OP_END, pack
from kag.core.eval.judge.candidate_process import MAX_TAIL_BYTES, CandidateFailure, CandidateProcess


@pytest.fixture
def judge_side(monkeypatch):
    """A CandidateProcess's reading side with a pipe the test writes the child's answers into."""
    proc = object.__new__(CandidateProcess)
    done_r, done_w = os.pipe()
    os.set_blocking(done_r, False)
    mine, theirs = multiprocessing.Pipe()
    proc.done_r, proc.conn, proc.spin, proc.tail = done_r, mine, False, b""
    monkeypatch.setattr(proc, "_alive_and_within_memory", lambda phase: True, raising=False)
    monkeypatch.setattr(proc, "kill", lambda: None, raising=False)
    yield proc, done_w
    for fd in (done_r, done_w):
        os.close(fd)
    mine.close()
    theirs.close()


def test_an_answer_carries_its_tail(judge_side):
    proc, done_w = judge_side
    word = pack(OP_END, 0, 7)
    os.write(done_w, word + COUNT.pack(5) + b"where")
    proc.wait_done(word, 5.0, "test")
    assert proc.tail == b"where"


def test_an_answer_to_another_call_is_refused(judge_side):
    """A child cannot answer ahead (call 8 before it was rung) or replay an old answer."""
    proc, done_w = judge_side
    os.write(done_w, pack(OP_CALL, 1, 8) + COUNT.pack(0))
    with pytest.raises(CandidateFailure, match="answered another call"):
        proc.wait_done(pack(OP_CALL, 1, 7), 5.0, "test")


def test_an_unbounded_answer_is_refused_before_it_is_read(judge_side):
    proc, done_w = judge_side
    word = pack(OP_END, 0, 3)
    os.write(done_w, word + COUNT.pack(MAX_TAIL_BYTES + 1))
    with pytest.raises(CandidateFailure, match="too long"):
        proc.wait_done(word, 5.0, "test")


def test_no_answer_is_a_timeout_naming_the_limit(judge_side):
    proc, _ = judge_side
    t0 = time.monotonic()
    with pytest.raises(CandidateFailure, match="did not finish within 0.3 s"):
        proc.wait_done(pack(OP_CALL, 0, 1), 0.3, "a call")
    assert time.monotonic() - t0 < 3.0


def test_a_stopped_child_runs_nothing_until_resumed(tmp_path):
    """SIGSTOP confirmed by waitpid: a child writing a counter as fast as it can writes nothing while
    stopped, and goes on once resumed."""
    counter = tmp_path / "counter"
    child = subprocess.Popen([sys.executable, "-c", (
        "import os, sys\n"
        "n = 0\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\n"
        "while True:\n"
        "    n += 1\n"
        "    os.pwrite(fd, str(n).encode().ljust(20), 0)\n"), str(counter)])
    proc = object.__new__(CandidateProcess)
    proc.pid, proc.exitcode, proc.stopped, proc.stop_sent = child.pid, None, False, False
    try:
        while not counter.exists() or not counter.read_text().strip():
            time.sleep(0.01)
        proc.stop()
        assert proc.stopped
        frozen = counter.read_text()
        time.sleep(0.3)
        assert counter.read_text() == frozen
        proc.resume()
        time.sleep(0.3)
        assert counter.read_text() != frozen
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("spin_s", [0.0, 0.002])
def test_the_child_polls_the_doorbell_only_where_asked(spin_s):
    """A child waiting for its next ring spins only for ``spin_s`` (GPU hosts, whose judge spins too),
    else it sleeps in the read: on a 2-core CPU host its poll held the core the judge woke on, and null
    windows read 2 ms long (a Python loop once scored faster than eager). Read from the thread's CPU
    time while it waits 30 ms for a ring."""
    import threading

    from kag.core.eval.candidate.candidate import _read_exact

    r, w = os.pipe()
    spent: list[float] = []

    def child() -> None:
        start = time.thread_time()
        _read_exact(r, 8, spin_s)
        spent.append(time.thread_time() - start)

    thread = threading.Thread(target=child)
    thread.start()
    time.sleep(0.03)
    os.write(w, b"x" * 8)
    thread.join(5)
    os.close(r)
    os.close(w)
    if spin_s:
        assert spent[0] >= 0.5 * spin_s, spent
    else:
        assert spent[0] < 0.0015, spent
