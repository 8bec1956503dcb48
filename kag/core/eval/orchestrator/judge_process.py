"""The orchestrator's handle on a judge process, and judges kept warm for the next evaluation.

A judge starts by importing torch (seconds on a GPU machine) and forking its candidate. One-shot
callers (``kag score``) start it before the build so the import overlaps the compile; long-lived
callers (an agent's episode, ``kag eval``, training) ask ``keep_judges_warm(n)`` to have judges
started ahead of need, so an evaluation finds one ready. A waiting judge touches no GPU: it gets
its GPU with the spec, from the pool, only when an evaluation takes it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Callable

import attrs

from kag.core.eval.boundary import JudgeReport, JudgeSpec
from kag.core.records import from_dict, to_dict

# An episode asks for verdicts in quick succession (verify, profile, then the final score once the
# sandbox is closed: three judges an episode on 4 x H200): with one judge kept per episode, a request
# right after another takes the replacement started for the first, still importing torch (2.7 s there).
JUDGES_PER_EPISODE = 2

# RAY_TMPDIR: the candidate empties Ray's temp folder (kag.core.trust.private_mounts); KAG_TIMELINE:
# the run's timeline (kag.core.timeline), which the candidate drops
# KAG_PCH_DIR: the judge's candidate plan hides the precompiled-header store it names (a judge without
# it hid the default store and left a configured one readable); KAG_TIMED_NICE: the timed child's
# priority (kag.core.eval.judge.priority), read by the judge (an A/B with it at 0 was void without it);
# KAG_KERNEL_RECORDER: the candidate's and runner's kernel records (kag.core.eval.candidate.observe; an A/B
# of it was void without it too)
JUDGE_ENV = ("HOME", "XDG_CACHE_HOME", "KAG_CACHE_DIR", "KAG_CONFINE", "TMPDIR", "KAG_LOCK_DIR", "KAG_BELL",
             "RAY_TMPDIR", "KAG_TIMELINE", "KAG_PCH_DIR", "KAG_TIMED_NICE", "KAG_KERNEL_RECORDER",
             "KAG_OBSERVER", "KAG_OP_COUNTER_DIR", "CXX")


def failed_report(kind: str, error: str) -> JudgeReport:
    """The verdict when the judge itself gave none (it died, hung or answered garbage)."""
    report = JudgeReport()
    report.fail(kind, error, judge_error=True)
    return report


class _Proc:
    """The part of ``multiprocessing.Process`` callers use, over ``subprocess.Popen``."""

    def __init__(self, popen: subprocess.Popen) -> None:
        self.popen = popen
        self.pid = popen.pid

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        self.popen.kill()


def judge_environment() -> dict[str, str]:
    """What a judge starts with: what Python, torch and CUDA need, the cache location and this
    process's import path; never API keys (its candidate inherits its memory)."""
    from kag.core.trust.isolation import minimal_env

    extra = {k: os.environ[k] for k in JUDGE_ENV if k in os.environ}
    path = [p for p in sys.path if p and os.path.isdir(p)]
    extra["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
    env = minimal_env(extra)
    # OpenMP workers that spin after a parallel region would be stopped mid-spin between the
    # candidate's calls (and steal the judge's cores): sleep instead, in baselines and candidate alike
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


STOPPING = threading.Event()  # set by a Ctrl-C's handler: no judge starts while the command ends


class JudgeProcess:
    """The judge, a fresh interpreter with a minimal environment. It is started before the build so
    that it (and its candidate, which it forks at once) import torch while the solution compiles;
    it touches no GPU until ``run`` sends the spec with the GPU the pool lent."""

    def __init__(self, daemon: bool = False) -> None:
        from multiprocessing.connection import Connection

        if STOPPING.is_set():
            raise RuntimeError("the command is stopping: no new judge")
        import secrets
        import tempfile

        from kag.core import scratch
        from kag.core.trust.isolation import socket_safe_tempdir

        ours, theirs = socket.socketpair()
        # first of all, before any import: Ctrl-C is the orchestrator's to handle, and the judge dies
        # with the thread that starts it (PR_SET_PDEATHSIG), or at once if that is gone already (a
        # judge started as a Ctrl-C ends the command would otherwise outlive it)
        code = ("import ctypes, os, signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                f"ctypes.CDLL(None).prctl(1, signal.SIGKILL); os.getppid() == {os.getpid()} or os._exit(0); "
                f"from kag.core.eval.judge.judge import judge_entry; judge_entry({theirs.fileno()})")
        env = judge_environment()
        self.environment = dict(env)  # what it started with: a warm judge is used only while it is still so
        self.tag = env[scratch.TAG_ENV] = secrets.token_hex(6)  # its scratch folders' names carry it
        scratch.remember_tagged(self.tag, [tempfile.gettempdir(), socket_safe_tempdir() or tempfile.gettempdir()])
        # a session of its own: a terminal's Ctrl-C (to the foreground process group) must not reach a
        # judge still starting (a KeyboardInterrupt traceback on the caller's stderr)
        popen = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()], env=env,
                                 stdin=subprocess.DEVNULL, close_fds=True, start_new_session=True)
        theirs.close()
        self.conn = Connection(ours.detach())
        self.proc = _Proc(popen)
        self.candidate_pid: int | None = None
        self.candidate_tmp: str | None = None  # the candidate's folder: removed once both are dead
        self.closed = False

    def torch_ready(self) -> bool:
        """Whether the judge has imported torch and forked its candidate (its first message).
        Only for a judge no evaluation has taken yet: it reads the judge's channel."""
        if self.candidate_pid is None and not self.closed and self.conn.poll(0):
            self._receive()
        return self.candidate_pid is not None

    def run(self, spec: JudgeSpec, visible_devices: str | None,
            on_phase: Callable[[str], None] | None = None) -> JudgeReport:
        """Send the spec and wait for the report under an overall deadline; ``on_phase`` hears each
        phase the judge enters (for a progress display)."""
        budget = spec.run_budget_s()
        report: JudgeReport | None = None
        try:
            self.conn.send(("spec", to_dict(attrs.evolve(spec, visible_devices=visible_devices))))
        except (OSError, EOFError):
            return failed_report("exception", f"the judge process ended before it got the spec "
                                              f"(exit status {self.proc.exitcode})")
        deadline = time.monotonic() + budget
        while report is None:
            if self.conn.poll(min(0.5, max(0.0, deadline - time.monotonic()))):
                msg = self._receive()
                if msg is None:
                    break
                if msg[0] == "phase" and on_phase is not None:
                    on_phase(str(msg[1]))
                if msg[0] == "result":
                    try:
                        report = from_dict(JudgeReport, json.loads(msg[1]))
                    except (ValueError, TypeError) as exc:
                        report = failed_report("exception", f"the judge's report could not be read: {exc}")
            elif not self.proc.is_alive() and not self.conn.poll(0):
                break
            elif time.monotonic() > deadline:
                report = failed_report("timeout", f"the evaluation did not finish within {budget:.0f} s and was killed")
        if report is None:
            self.proc.join(timeout=5)
            report = failed_report("exception", f"the judge process ended without a report "
                                                f"(exit status {self.proc.exitcode})")
        return report

    def _receive(self) -> tuple | None:
        """The judge's next message (None when its end is closed); notes the candidate's pid."""
        try:
            msg = self.conn.recv()
        except (EOFError, OSError):
            return None
        if msg[0] == "candidate":
            self.candidate_pid = msg[1]
            self.candidate_tmp = msg[2] if len(msg) > 2 else None
            from kag.core import scratch

            for folder, prefix in zip(msg[2:6], ("kag-cand-", "kag-out-", "pymp-", "kag-opc-")):  # removed by the judge, or by
                if isinstance(folder, str) and os.path.isabs(folder) \
                        and os.path.basename(folder).startswith(prefix):  # a Ctrl-C's sweep after a kill
                    scratch.remember(folder)
        return msg

    def close(self) -> None:
        """Kill what is left: the candidate's session and the judge."""
        import signal

        if self.closed:
            return
        self.closed = True
        while self.candidate_pid is None and self.conn.poll(0) and self._receive() is not None:
            pass
        if self.candidate_pid is not None:
            try:
                os.killpg(self.candidate_pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.proc.is_alive():
            try:
                self.conn.send(("exit", None))
            except (OSError, EOFError):
                pass
            self.proc.join(timeout=15)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()
        if self.candidate_tmp and not self.proc.is_alive():  # a judge killed mid-way leaves it behind
            import shutil

            shutil.rmtree(self.candidate_tmp, ignore_errors=True)  # fd-based: links in it are not followed
        if not self.proc.is_alive():
            from kag.core import scratch

            scratch.remove_tagged(self.tag)


class WarmJudges:
    """Judges started in advance by one long-lived thread.

    The thread matters: a judge dies with the thread that started it (PR_SET_PDEATHSIG), so judges
    are never started from an evaluation's worker thread, which may end first.
    """

    def __init__(self) -> None:
        self.ready: list[JudgeProcess] = []
        self.wanted = 0
        self.cond = threading.Condition()
        self.thread: threading.Thread | None = None

    def keep(self, n: int) -> None:
        """At least ``n`` ready (a caller asking for fewer does not lower it); 0 turns it off."""
        with self.cond:
            self.wanted = max(self.wanted, n) if n > 0 else 0
            if self.wanted and self.thread is None:
                self.thread = threading.Thread(target=self._run, name="kag-warm-judges", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def take(self) -> "JudgeProcess | None":
        """A judge started in this process's present environment (one started before a change of
        TMPDIR, the cache or the lock folder would judge with what is gone: it is closed), or None."""
        now = judge_environment()
        with self.cond:
            while self.ready:
                judge = self.ready.pop(0)
                self.cond.notify_all()  # start a replacement
                if judge.proc.is_alive() and judge.environment == now:
                    return judge
                judge.close()
        return None

    def count_ready(self) -> tuple[int, int]:
        """(started, of which torch is imported) among the judges waiting."""
        with self.cond:
            return len(self.ready), sum(1 for judge in self.ready if judge.torch_ready())

    def _run(self) -> None:
        while True:
            with self.cond:
                while len(self.ready) >= self.wanted:
                    self.cond.wait()
            judge = JudgeProcess(daemon=True)  # daemonic: never joined at interpreter exit
            with self.cond:
                self.ready.append(judge)


WARM = WarmJudges()


def keep_judges_warm(n: int = 1) -> None:
    """Keep at least ``n`` judges started ahead of need in this process (``KAG_WARM_JUDGES``
    overrides; 0 turns it off). For processes that evaluate again and again on a GPU."""
    env = os.environ.get("KAG_WARM_JUDGES")
    WARM.keep(int(env) if env and env.isdigit() else n)


def warm_judge_waiting() -> bool:
    with WARM.cond:
        return bool(WARM.ready)


def take_judge() -> JudgeProcess:
    """A warm judge if one is waiting, else a new one."""
    return WARM.take() or JudgeProcess()
