"""The sandbox protocol: where an episode's workspace lives and where its commands run.

A sandbox plugin (kind ``sandbox``) is a factory; ``start(workspace_dir)`` gives a handle for one
episode. File tools work on ``handle.path()`` (a directory on this machine, mounted into the
sandbox when the sandbox is a container); commands run through ``run``, ``open_shell`` and
``spawn``, which see the workspace as ``handle.workdir``.

A handle may also evaluate (``SandboxEvaluator``): a sandbox whose point is that the agent's code
never runs on this machine (``docker``) must build and evaluate the episode's solutions itself, so
the episode's evaluator (``kag.core.agent.EpisodeEvaluator``, the RL environment's) asks the
handle through ``evaluate_with``/``build_with`` and falls back to the local trusted evaluator
(``kag.core.evaluate``) only for handles without one. Trusted side: this module runs on the host.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from kag.core.build import BuildResult
    from kag.core.evaluate import EvalOptions
    from kag.core.plugins import Plugins
    from kag.core.records import EvalResult, Solution, Task


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


@runtime_checkable
class SandboxEvaluator(Protocol):
    """A handle that builds and evaluates its episode's solutions itself (where its commands run,
    or somewhere as confined), never on this machine. Both methods stay usable after ``close()``:
    an episode's final re-score runs once its commands are stopped. Neither raises for anything
    the solution does; error texts must not carry this machine's file contents."""

    def build(self, solution: Solution, options: EvalOptions, plugins: Plugins) -> BuildResult:
        """What ``kag.core.build.build_solution`` would answer (``module_dir`` may be None)."""

    def evaluate(self, task: Task, solution: Solution, options: EvalOptions | None = None,
                 plugins: Plugins | None = None, pool: Any = None) -> EvalResult:
        """What ``kag.core.evaluate.evaluate`` would answer."""


def evaluate_with(handle: Any, task: Task, solution: Solution, options: EvalOptions,
                  plugins: Plugins, pool: Any = None) -> EvalResult:
    """The verdict from the handle's own evaluator when it has one, else from the local one."""
    if isinstance(handle, SandboxEvaluator):
        return handle.evaluate(task, solution, options, plugins, pool=pool)
    from kag.core.evaluate import evaluate

    return evaluate(task, solution, options, plugins, pool=pool)


def build_with(handle: Any, solution: Solution, options: EvalOptions, plugins: Plugins,
               out_dir: Path) -> BuildResult:
    """A build by the handle's own evaluator when it has one, else a local build into ``out_dir``."""
    if isinstance(handle, SandboxEvaluator):
        return handle.build(solution, options, plugins)
    from kag.core.build import build_solution

    backend = plugins.create("backend", options.backend)
    return build_solution(solution, backend, out_dir, timeout_s=options.timeouts.build_s)
