"""The sandbox protocol: where an episode's workspace lives and where its commands run.

A sandbox plugin (kind ``sandbox``) is a factory; ``start(workspace_dir)`` gives a handle for one
episode. File tools work on ``handle.path()`` (a directory on this machine, mounted into the
sandbox when the sandbox is a container); commands run through ``run``, ``open_shell`` and
``spawn``, which see the workspace as ``handle.workdir``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Protocol, runtime_checkable

import attrs


@attrs.define
class CommandResult:
    """One finished (or killed) command: exit status, its output, and whether it timed out."""

    returncode: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    elapsed_s: float = 0.0

    @property
    def output(self) -> str:
        """stdout then stderr, for showing to a model or a person."""
        if self.stdout and self.stderr:
            sep = "" if self.stdout.endswith("\n") else "\n"
            return f"{self.stdout}{sep}{self.stderr}"
        return self.stdout or self.stderr


@runtime_checkable
class SandboxHandle(Protocol):
    """One episode's running sandbox."""

    workdir: str  # the workspace path as commands inside the sandbox see it

    def path(self, rel: str = "") -> Path:
        """The workspace (or a file in it) on this machine."""

    def run(self, cmd: str, timeout: float | None = None, cwd: str | None = None) -> CommandResult:
        """Run ``cmd`` with ``bash -c``; on timeout the whole process group is killed."""

    def open_shell(self) -> subprocess.Popen:
        """A long-lived ``bash`` reading commands on stdin, stdout+stderr merged on stdout, in its
        own session (so killing its process group ends everything it started)."""

    def spawn(self, cmd: str, cwd: str | None = None) -> subprocess.Popen:
        """Start ``cmd`` in the background (own session), stdout+stderr merged on a pipe."""

    def close(self) -> None:
        """Stop everything and remove what ``start`` created (idempotent)."""


@runtime_checkable
class Sandbox(Protocol):
    """A sandbox plugin: configured once, started per episode."""

    def start(self, workspace_dir: str | Path | None = None, bridge_dir: str | Path | None = None) -> SandboxHandle:
        """Put the workspace in the sandbox (copied unless configured otherwise) and return a handle.

        ``bridge_dir`` holds the evaluation bridge's socket (``kag.core.bridge``); the sandbox makes
        it reachable to commands and sets KAG_BRIDGE to the socket's path as they see it."""
