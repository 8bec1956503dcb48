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


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class CandidateProcess:
    """A spawned candidate with a wall-clock timeout on every wait; killed with its session."""

    def __init__(self, spec: dict[str, Any]):
        import torch.multiprocessing as tmp

        from kag.core.candidate import candidate_main, spawn_process

        self.conn, child = tmp.get_context("spawn").Pipe(duplex=True)
        self.proc = spawn_process(candidate_main, (child, spec), "kag-candidate")
        child.close()

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
            if time.monotonic() >= deadline:
                self.kill()
                raise CandidateFailure("timeout", f"{phase} did not finish within {timeout_s:g} s; "
                                                  f"the candidate process was killed")

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
