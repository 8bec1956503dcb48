"""``bash``, ``bash_output`` and ``kill_bash``: a persistent shell session and background jobs.

One long-lived ``bash`` per episode (from the sandbox's ``open_shell``) is fed each command through
its stdin, wrapped in ``eval`` of a quoted here-document so syntax errors cannot desynchronise it,
and followed by a sentinel line carrying the exit status and working directory. So ``cd`` and
``export`` persist between calls. A command that outlives its timeout takes the session with it:
the process group is killed and a fresh shell starts in the same directory (with a note saying
so). Background jobs run through the sandbox's ``spawn`` in the session's current directory.
"""

from __future__ import annotations

import base64
import os
import queue
import re
import secrets
import shlex
import subprocess
import threading
import time
from typing import Any

from kag.plugin import Tool, ToolContext, ToolError, ToolOutput, hookimpl

CAPTURE_HEAD = 1 << 20  # bytes kept from the start of a command's output
CAPTURE_TAIL = 1 << 20  # bytes kept from its end (the middle is dropped and counted)
KEEP_PENDING = 8192  # bytes held back while looking for the sentinel line (it carries $PWD)


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=1.5)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Capture:
    """Output kept as head + tail with the middle counted, so a flood cannot exhaust memory."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = CAPTURE_HEAD - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > CAPTURE_TAIL:
            cut = len(self.tail) - CAPTURE_TAIL
            del self.tail[:cut]
            self.dropped += cut

    def text(self) -> str:
        middle = f"\n[... {self.dropped} bytes of output dropped ...]\n".encode() if self.dropped else b""
        return (bytes(self.head) + middle + bytes(self.tail)).decode(errors="replace")


def _pump(stream: Any, out: "queue.Queue[bytes | None]") -> None:
    fd = stream.fileno()
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            out.put(None)
            return
        out.put(data)


class ShellSession:
    """A persistent bash fed through a pipe; ``run`` returns (output, exit code, note)."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.cwd = ctx.workdir
        self.proc: subprocess.Popen | None = None
        self.leftover = b""
        self._start()

    def _start(self) -> None:
        self.token = secrets.token_hex(8)
        self.leftover = b""
        self.proc = self.ctx.sandbox.open_shell()
        self.out: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=_pump, args=(self.proc.stdout, self.out), daemon=True).start()
        self._write(f"cd {shlex.quote(self.cwd)} 2>/dev/null || cd {shlex.quote(self.ctx.workdir)}\n")

    def _write(self, text: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc is not None:
            _kill_group(self.proc)
            self.proc = None

    def restart(self) -> None:
        self.close()
        self._start()

    def run(self, command: str, timeout: float) -> tuple[str, int | None, str]:
        """Run one command; exit code None means it was killed (timeout) or the shell died."""
        if self.proc is None or self.proc.poll() is not None:
            self.restart()
        sentinel = f"__KAG_DONE_{self.token}__"
        encoded = base64.b64encode(command.encode()).decode()
        script = (f"eval \"$(printf %s {encoded} | base64 -d)\" < /dev/null\n"
                  f"printf '\\n{sentinel} %s %s\\n' \"$?\" \"$PWD\"\n")
        pattern = re.compile(rb"\n" + sentinel.encode() + rb" (\d+) ([^\n]*)\n")
        capture, pending = _Capture(), self.leftover
        self.leftover = b""
        deadline = time.monotonic() + timeout
        try:
            self._write(script)
        except (BrokenPipeError, OSError):
            self.restart()
            return "", None, "the shell had exited; a new session was started, run the command again"
        while True:
            match = pattern.search(pending)
            if match is not None:
                capture.add(pending[: match.start()])
                self.leftover = pending[match.end():]  # late output of `cmd &` goes to the next call
                self.cwd = match.group(2).decode(errors="replace") or self.cwd
                return capture.text(), int(match.group(1)), ""
            if len(pending) > 2 * KEEP_PENDING:
                capture.add(pending[:-KEEP_PENDING])
                pending = pending[-KEEP_PENDING:]
            left = deadline - time.monotonic()
            if left <= 0:
                capture.add(pending)
                self.restart()
                return capture.text(), None, (
                    f"the command timed out after {timeout:g} s and was killed; the shell was restarted "
                    f"in {self.cwd} (environment variables and shell functions were reset). "
                    f"Use run_in_background=true for long commands.")
            try:
                data = self.out.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if data is None:  # the shell exited (e.g. `exit`)
                capture.add(pending)
                self.restart()
                return capture.text(), None, (f"the shell exited; a new session was started in {self.cwd} "
                                              f"(environment variables were reset)")
            pending += data


class BackgroundJob:
    def __init__(self, job_id: str, command: str, proc: subprocess.Popen) -> None:
        self.id = job_id
        self.command = command
        self.proc = proc
        self.capture = _Capture()
        self.read_upto = 0  # characters of capture.text() already shown
        self.done = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            with self.lock:
                self.capture.add(data)
        self.proc.wait()
        self.done.set()

    def status(self) -> str:
        code = self.proc.poll()
        return "running" if code is None or not self.done.is_set() else f"exited with code {code}"

    def new_output(self) -> str:
        with self.lock:
            text = self.capture.text()
        new, self.read_upto = text[self.read_upto:], len(text)
        return new


def _session(ctx: ToolContext) -> ShellSession:
    session = ctx.state.get("bash_session")
    if session is None:
        session = ShellSession(ctx)
        ctx.state["bash_session"] = session
        ctx.on_close(session.close)
    return session


def _jobs(ctx: ToolContext) -> dict[str, BackgroundJob]:
    jobs = ctx.state.get("bash_jobs")
    if jobs is None:
        jobs = ctx.state["bash_jobs"] = {}

        def kill_all() -> None:
            for job in jobs.values():
                _kill_group(job.proc)

        ctx.on_close(kill_all)
    return jobs


class BashTool(Tool):
    name = "bash"
    description = (
        "Run a bash command in a persistent shell session in the workspace (cd and exported variables "
        "persist between calls). stdout and stderr are returned together with the exit code. Commands are "
        "killed after `timeout` seconds. Set run_in_background=true for long-running commands: you get a "
        "job id, read its output with bash_output and stop it with kill_bash.")
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to run."},
            "timeout": {"type": "number", "minimum": 1, "maximum": 3600,
                        "description": "Seconds before the command is killed (default 120)."},
            "run_in_background": {"type": "boolean", "description": "Start the command as a background job."},
            "description": {"type": "string", "description": "A few words on what the command does."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    truncate_hint = "redirect long output to a file and read or grep it"

    def __init__(self, max_output_chars: int | None = None, default_timeout_s: float = 120.0,
                 max_timeout_s: float = 3600.0) -> None:
        super().__init__(max_output_chars)
        self.default_timeout_s = float(default_timeout_s)
        self.max_timeout_s = float(max_timeout_s)

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        command = args["command"]
        if not command.strip():
            raise ToolError("the command is empty")
        session = _session(ctx)
        if args.get("run_in_background"):
            jobs = _jobs(ctx)
            job_id = f"job{len(jobs) + 1}"
            proc = ctx.sandbox.spawn(command, cwd=session.cwd)
            jobs[job_id] = BackgroundJob(job_id, command, proc)
            return ToolOutput(f"started background job {job_id} (pid {proc.pid}) in {session.cwd}; "
                              f"read its output with bash_output(job_id={job_id!r})", metadata={"job_id": job_id})
        timeout = min(float(args.get("timeout") or self.default_timeout_s), self.max_timeout_s)
        output, code, note = session.run(command, timeout)
        text = output.rstrip("\n")
        if code is None:
            return ToolOutput(f"{text}\n[{note}]" if text else f"[{note}]", is_error=True,
                              metadata={"timed_out": "timed out" in note})
        if code != 0:
            text = f"{text}\n[exit code {code}]" if text else f"[exit code {code}]"
        return ToolOutput(text if text else "(no output)", is_error=code != 0, metadata={"exit_code": code})


def _job(ctx: ToolContext, job_id: str) -> BackgroundJob:
    job = _jobs(ctx).get(job_id)
    if job is None:
        known = ", ".join(_jobs(ctx)) or "none started"
        raise ToolError(f"no background job {job_id!r} (jobs: {known})")
    return job


class BashOutputTool(Tool):
    name = "bash_output"
    description = "Read the new output of a background job started with bash(run_in_background=true), and its status."
    parameters = {
        "type": "object",
        "properties": {"job_id": {"type": "string", "description": "The id bash returned."}},
        "required": ["job_id"],
        "additionalProperties": False,
    }
    truncate_hint = "older output is not shown again"

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        job = _job(ctx, args["job_id"])
        job.done.wait(0.05)
        status = job.status()
        new = job.new_output().rstrip("\n")
        return ToolOutput(f"[{job.id}: {status}]\n{new}" if new else f"[{job.id}: {status}; no new output]",
                          metadata={"status": status})


class KillBashTool(Tool):
    name = "kill_bash"
    description = "Stop a background job (and everything it started)."
    parameters = BashOutputTool.parameters

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        job = _job(ctx, args["job_id"])
        if job.done.is_set():
            return ToolOutput(f"{job.id} had already {job.status()}")
        _kill_group(job.proc)
        job.done.wait(5)
        return ToolOutput(f"killed {job.id} ({job.command[:80]})")


@hookimpl
def kag_register_tools(register) -> None:
    register("bash", BashTool)
    register("bash_output", BashOutputTool)
    register("kill_bash", KillBashTool)
