"""The sandbox protocol: where an episode's workspace lives and where its commands run.

A sandbox plugin (kind ``sandbox``) is a factory; ``start(workspace_dir)`` gives a handle for one
episode. File tools work on ``handle.path()`` (a directory on this machine, mounted into the
sandbox when the sandbox is a container); commands run through ``run``, ``open_shell`` and
``spawn``, which see the workspace as ``handle.workdir``.

A handle may also evaluate (``SandboxEvaluator``): a sandbox whose point is that the agent's code
never runs on this machine (``docker``) must build and evaluate the episode's solutions itself, so
the episode's evaluator (``kag.core.agent.episode.EpisodeEvaluator``, for ``kag run`` and the RL
environment alike) asks the handle through ``evaluate_with``/``build_with`` and falls back to the
local trusted evaluator (``kag.core.eval.orchestrator.evaluate``) only for handles without one. Trusted side: this
module runs on the host. The Protocols (``Sandbox``, ``SandboxHandle``, ``SandboxEvaluator``) live
in kag.core.contracts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from kag.core.contracts import Sandbox, SandboxEvaluator, SandboxHandle  # noqa: F401 - the contracts, re-exported

if TYPE_CHECKING:
    from kag.core.eval.orchestrator.build import BuildResult
    from kag.core.eval.orchestrator.evaluate import EvalOptions
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


def evaluate_with(handle: Any, task: Task, solution: Solution, options: EvalOptions,
                  plugins: Plugins, pool: Any = None) -> EvalResult:
    """The verdict from the handle's own evaluator when it has one, else from an executor's workers
    when ``pool`` is one's (kag.core.eval.serve.remote.ExecutorEvaluations), else from the local one."""
    if isinstance(handle, SandboxEvaluator):
        return handle.evaluate(task, solution, options, plugins, pool=pool)
    from kag.core.eval.serve.remote import ExecutorEvaluations

    if isinstance(pool, ExecutorEvaluations):
        return pool.evaluate(task, solution, options)
    from kag.core.eval.orchestrator.evaluate import evaluate

    return evaluate(task, solution, options, plugins, pool=pool)


def build_with(handle: Any, solution: Solution, options: EvalOptions, plugins: Plugins,
               out_dir: Path) -> BuildResult:
    """A build by the handle's own evaluator when it has one, else a local build into ``out_dir``."""
    if isinstance(handle, SandboxEvaluator):
        return handle.build(solution, options, plugins)
    from kag.core.eval.orchestrator.build import build_solution

    backend = plugins.create("backend", options.backend)
    return build_solution(solution, backend, out_dir, timeout_s=options.timeouts.build_s)
