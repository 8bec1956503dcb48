"""The judge's handle on a spawned candidate process: a channel with a wall-clock timeout on every
wait, messages unpickled with the channel's allow-list, and exit statuses turned into reasons."""

from __future__ import annotations

import os
import signal
import time
from typing import Any


class CandidateFailure(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def default_host_memory_bytes() -> int:
    """Half of this machine's RAM: what one candidate may hold in private memory before it is
    killed as out of memory (the OOM killer would otherwise take the judge, or the machine)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        return 16 << 30


def session_anon_bytes(sid: int) -> int:
    """Private resident memory (RssAnon) of every process in session ``sid`` (Linux /proc); shared
    memory, which carries the judge's input tensors on the CPU backend, is not counted."""
    total = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[3]) != sid:  # state ppid pgrp session ...
                continue
            with open(f"/proc/{entry}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"RssAnon:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            continue
    return total


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class ForkedChild:
    """A child of this process made with ``os.fork``: the part of ``multiprocessing.Process`` the
    judge uses (pid, is_alive, join, exitcode, kill).

    The judge forks the candidate right after importing torch and before any CUDA call, so the
    candidate starts in milliseconds instead of importing torch again. The child keeps only
    stdin/stdout/stderr and ``keep_fds``: every other inherited descriptor (the judge's channel to
    the orchestrator above all) is pointed at /dev/null before ``target`` runs.
    """

    def __init__(self, target: Any, args: tuple, keep_fds: tuple[int, ...] = ()):
        self.exitcode: int | None = None
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                _blank_fds(set(keep_fds) | {0, 1, 2})
                target(*args)
                code = 0
            except BaseException:  # noqa: BLE001 - the judge sees the exit status
                code = 1
            finally:
                os._exit(code)
        self.pid = pid

    def _reap(self, flags: int) -> bool:
        if self.exitcode is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:
            self.exitcode = -signal.SIGKILL
            return True
        if pid == 0:
            return False
        self.exitcode = os.waitstatus_to_exitcode(status)
        return True

    def is_alive(self) -> bool:
        return not self._reap(os.WNOHANG)

    def join(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._reap(os.WNOHANG):
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(0.005)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _blank_fds(keep: set[int]) -> None:
    """Point every open descriptor not in ``keep`` at /dev/null (numbers stay taken, so a stale
    object closing one later cannot close something the child opened since)."""
    null = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
        fd = int(name)
        if fd in keep or fd == null:
            continue
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


class CandidateProcess:
    """A spawned candidate with a wall-clock timeout on every wait; killed with its session.

    The interpreter starts (and imports torch) as soon as this is built, while the judge still
    loads the reference and times the baselines; ``prepare`` then initialises the device and
    ``start`` hands over the solution, which is imported only then, after the baselines.
    """

    MEMORY_CHECK_INTERVAL_S = 0.5

    def __init__(self, output_fifo: str | None = None, host_memory_bytes: int | None = None):
        import multiprocessing

        from kag.core.candidate import candidate_main

        self.host_memory_bytes = host_memory_bytes or default_host_memory_bytes()
        self._memory_checked = 0.0
        self.conn, child = multiprocessing.Pipe(duplex=True)
        self.proc = ForkedChild(candidate_main, (child, output_fifo), keep_fds=(child.fileno(),))
        child.close()

    def prepare(self, device: str, env: dict[str, str]) -> None:
        """Set the candidate's environment (CUDA_VISIBLE_DEVICES) and initialise its device; no reply
        is awaited, so this overlaps with the judge's own work."""
        self.send(("prepare", {"device": device, "env": env}))

    def start(self, spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Import model_new.py and build ModelNew; returns the candidate's "ready" info."""
        self.send(("spec", spec))
        prepared = self.receive(timeout_s, "starting the candidate process")
        if prepared[0] != "prepared":
            raise CandidateFailure("exception", f"starting the candidate: unexpected reply {prepared[0]!r}")
        ready = self.receive(timeout_s, "importing model_new.py and building ModelNew")
        if ready[0] != "ready":
            raise CandidateFailure("exception", f"loading the solution: unexpected reply {ready[0]!r}")
        return ready[1] if isinstance(ready[1], dict) else {}

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def send(self, msg: tuple) -> None:
        from kag.core.channel import dumps

        try:
            self.conn.send_bytes(dumps(msg))
        except (OSError, EOFError):
            raise self._closed("while receiving a request") from None

    def receive(self, timeout_s: float, phase: str) -> tuple:
        from kag.core.channel import MAX_MESSAGE_BYTES, RefusedObject, restricted_loads

        deadline = time.monotonic() + timeout_s
        while True:
            if self.conn.poll(min(0.2, max(0.0, deadline - time.monotonic()))):
                try:
                    data = self.conn.recv_bytes(MAX_MESSAGE_BYTES)
                except (EOFError, OSError):
                    raise self._closed(f"during {phase}") from None
                try:
                    msg = restricted_loads(data)
                except RefusedObject as exc:
                    raise CandidateFailure("exception", f"{phase}: {exc}") from None
                except Exception as exc:  # noqa: BLE001 - e.g. shared memory of a dead process
                    raise CandidateFailure("crash", f"{phase}: unreadable message from the candidate "
                                                    f"({type(exc).__name__}: {exc})") from None
                if not isinstance(msg, tuple) or not msg or not isinstance(msg[0], str):
                    raise CandidateFailure("exception", f"{phase}: malformed message from the candidate")
                if msg[0] == "error":
                    kind = msg[1] if msg[1] in ("oom", "cuda_error", "exception") else "exception"
                    raise CandidateFailure(kind, str(msg[2]))
                return msg
            if not self.proc.is_alive() and not self.conn.poll(0):
                raise self._closed(f"during {phase}")
            self._check_memory(phase)
            if time.monotonic() >= deadline:
                self.kill()
                raise CandidateFailure("timeout", f"{phase} did not finish within {timeout_s:g} s; "
                                                  f"the candidate process was killed")

    def _check_memory(self, phase: str) -> None:
        now = time.monotonic()
        if now - self._memory_checked < self.MEMORY_CHECK_INTERVAL_S or self.proc.pid is None:
            return
        self._memory_checked = now
        used = session_anon_bytes(self.proc.pid)  # the candidate leads its own session (setsid)
        if used > self.host_memory_bytes:
            self.kill()
            raise CandidateFailure("oom", f"{phase}: the candidate held {used / 2**30:.1f} GiB of host memory, over "
                                          f"the limit of {self.host_memory_bytes / 2**30:.1f} GiB, and was killed")

    def _closed(self, when: str) -> CandidateFailure:
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        if code is None:
            self.kill()
            return CandidateFailure("crash", f"the candidate closed its channel {when} and was killed")
        if code < 0:
            hint = " (host out of memory?)" if code == -signal.SIGKILL else ""
            return CandidateFailure("crash", f"the candidate process crashed {when}: killed by "
                                             f"{_signal_name(code)}{hint}")
        return CandidateFailure("crash", f"the candidate process exited with status {code} {when} before "
                                         f"answering (os._exit or sys.exit in the solution?)")

    def kill(self) -> None:
        pid = self.proc.pid
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=10)

    def close(self, grace_s: float = 5.0) -> None:
        if self.proc.is_alive():
            try:
                self.send(("exit", None))
            except CandidateFailure:
                pass
            self.proc.join(timeout=grace_s)
        self.kill()
        self.conn.close()
