"""The timed child raised above the host's other work for its windows only, on this machine's real
scheduler (kag.core.eval.judge.priority): every thread while raised, every thread put back after,
those it started while raised included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kag.core.eval.judge.priority import JUDGE_NICE, autogroup_nice, threads_of, timed_nice, timed_priority

NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="raising a priority needs CAP_SYS_NICE")

CHILD = """
import sys, threading, time
def idle():
    while True:
        time.sleep(0.01)
for _ in range(2):
    threading.Thread(target=idle, daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:  # one line: start one more thread (from whichever priority the main thread has now)
    threading.Thread(target=idle, daemon=True).start()
    print("started", flush=True)
"""


class Child:
    """A process with threads, stopped and resumed as the judge's CandidateProcess does."""

    def __init__(self) -> None:
        self.p = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  start_new_session=True)  # a session of its own, as the judge's children are
        assert self.p.stdout.readline().strip() == "ready"
        self.pid = self.p.pid
        self.stopped = self.stop_sent = False

    def more_threads(self) -> None:
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline().strip() == "started"

    def stop(self) -> None:
        if not self.stop_sent:
            os.kill(self.pid, signal.SIGSTOP)
            self.stop_sent = True
        if not self.stopped:
            os.waitpid(self.pid, os.WUNTRACED)
            self.stopped = True

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)
        self.stopped = self.stop_sent = False

    def nices(self) -> dict[int, int]:
        return {t: os.getpriority(os.PRIO_PROCESS, t) for t in threads_of(self.pid)}

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


@pytest.fixture
def child():
    c = Child()
    yield c
    c.close()


@NEEDS_ROOT
def test_every_thread_is_raised_for_the_windows_and_put_back_after(child: Child, monkeypatch) -> None:
    monkeypatch.delenv("KAG_TIMED_NICE", raising=False)
    before = child.nices()
    assert len(before) == 3 and set(before.values()) == {0}
    child.stop()
    with timed_priority(child) as nice:
        assert nice == timed_nice() < 0
        assert set(child.nices().values()) == {nice}
        child.resume()
        child.more_threads()  # started while raised: inherits the raise
        raised = child.nices()
        assert len(raised) == 4 and set(raised.values()) == {nice}
        child.stop_sent = True  # the last window's stop, not yet confirmed
        os.kill(child.pid, signal.SIGSTOP)
    after = child.nices()
    assert len(after) == 4 and set(after.values()) == {0}, after
    assert child.stopped  # put back while it could start nothing
    assert autogroup_nice(child.pid) in (None, 0)


@NEEDS_ROOT
@pytest.mark.skipif(autogroup_nice(os.getpid()) is None, reason="the kernel does not group tasks by session here")
def test_where_tasks_are_grouped_by_session_the_childs_group_is_raised_too(child: Child, monkeypatch) -> None:
    """With autogroup a thread's nice counts only inside its session's group: the child's group is
    raised for the windows and put back after, and the test's own session is left alone."""
    monkeypatch.delenv("KAG_TIMED_NICE", raising=False)
    mine = autogroup_nice(os.getpid())
    child.stop()
    with timed_priority(child) as nice:
        assert autogroup_nice(child.pid) == nice
        assert autogroup_nice(os.getpid()) == mine
    assert autogroup_nice(child.pid) == 0


@NEEDS_ROOT
def test_a_cpu_or_a_setting_of_zero_raises_nothing(child: Child, monkeypatch) -> None:
    with timed_priority(child, raise_it=False) as nice:
        assert nice is None and set(child.nices().values()) == {0}
    monkeypatch.setenv("KAG_TIMED_NICE", "0")
    with timed_priority(child) as nice:
        assert nice is None and set(child.nices().values()) == {0}
    monkeypatch.setenv("KAG_TIMED_NICE", "-19")  # never at or above the judge
    assert timed_nice() == JUDGE_NICE + 1


def test_without_privilege_nothing_is_raised_and_nothing_fails(monkeypatch) -> None:
    """Not root: the raise is refused quietly (the report then has no ``timed_nice``)."""
    monkeypatch.delenv("KAG_TIMED_NICE", raising=False)
    code = ("import os, sys; sys.path.insert(0, sys.argv[1])\n"
            "from kag.core.eval.judge.priority import timed_priority\n"
            "os.setuid(65534) if os.geteuid() == 0 else None\n"
            "class P: pid = os.getpid(); stopped = stop_sent = False\n"
            "with timed_priority(P()) as nice: print(nice, os.getpriority(os.PRIO_PROCESS, 0))\n")
    root = str(Path(__file__).resolve().parents[4])
    out = subprocess.run([sys.executable, "-c", code, root], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "0"], out.stdout
