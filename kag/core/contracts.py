"""Every plugin kind's contract in one file: what the core calls on the objects a factory makes.

A plugin registers ``register(name, factory)`` for a kind (kag.core.hookspecs); the core calls
``factory(**options)`` and uses what it returns only through the members below. They are gathered
here so that a newcomer writing a plugin finds every kind's contract in one place instead of
reading the core to learn what it calls. ``KIND_CONTRACTS`` maps each kind to its contract.

Members a docstring calls optional are looked up with ``getattr`` and may be left out; the rest
are required. A factory may also have ``check_available() -> str | None`` (any kind): ``kag
plugins`` shows its answer, None meaning the item can run on this machine. Every Protocol is
``runtime_checkable``: ``isinstance`` checks that the members exist, not their signatures.
Other modules' types are imported only for type checkers, so this module imports nothing of kag's
and the modules that used to define some of these Protocols re-export them from here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol, runtime_checkable

if TYPE_CHECKING:
    import random

    from kag.core.eval.orchestrator.build import BuildResult
    from kag.core.agent.environment import StepResult
    from kag.core.eval.orchestrator.evaluate import EvalOptions
    from kag.core.eval.orchestrator.guarding import RunInfo
    from kag.core.eval.candidate.observations import Observations
    from kag.core.plugins import Plugins
    from kag.core.agent.policy import PolicyStep
    from kag.core.records import EvalResult, Message, Solution, Task, Violation
    from kag.core.agent.sandbox import CommandResult
    from kag.core.data.synthesis import ComposedTask, CrawlResult, Seed
    from kag.core.tasks import LoadedTasks
    from kag.core.agent.toolkit import ToolContext, ToolOutput


# -- dataset ------------------------------------------------------------------------------------
@runtime_checkable
class Dataset(Protocol):
    """A task source, made from ``path``, ``level`` and ``ids`` options (kag.cli.common.open_dataset)."""

    def load(self, execute: bool = True) -> LoadedTasks:
        """Its tasks, and the files it skipped with why; ``execute=False`` checks a task's text
        without running its code (decontamination only reads it)."""


# -- tool ---------------------------------------------------------------------------------------
@runtime_checkable
class AgentTool(Protocol):
    """An agent tool (kag.core.agent.toolkit.Tool is the built-ins' base). Optional: ``validate(args) ->
    list[str]``, the reasons a call's arguments are invalid (the RL environment flags such calls)."""

    name: str  # what the model calls it by; unique among the selected tools

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling description shown to the model."""

    def __call__(self, ctx: ToolContext, /, **args: Any) -> ToolOutput:
        """Run one call; a failure is a ``ToolOutput`` with ``is_error=True``, not an exception."""


# -- sandbox ------------------------------------------------------------------------------------
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

        ``bridge_dir`` holds the evaluation bridge's socket (``kag.core.agent.bridge``); the sandbox makes
        it reachable to commands and sets KAG_BRIDGE to the socket's path as they see it."""


@runtime_checkable
class SandboxEvaluator(Protocol):
    """A handle that builds and evaluates its episode's solutions itself (where its commands run,
    or somewhere as confined), never on this machine. Both methods stay usable after ``close()``:
    an episode's final re-score runs once its commands are stopped. Neither raises for anything
    the solution does; error texts must not carry this machine's file contents."""

    def build(self, solution: Solution, options: EvalOptions, plugins: Plugins) -> BuildResult:
        """What ``kag.core.eval.orchestrator.build.build_solution`` would answer (``module_dir`` may be None)."""

    def evaluate(self, task: Task, solution: Solution, options: EvalOptions | None = None,
                 plugins: Plugins | None = None, pool: Any = None) -> EvalResult:
        """What ``kag.core.eval.orchestrator.evaluate.evaluate`` would answer."""


# -- baseline -----------------------------------------------------------------------------------
@runtime_checkable
class Baseline(Protocol):
    """What the candidate is timed against; made with ``mode=`` ("default" where it has no modes)."""

    def prepare(self, model: Any) -> Callable[..., Any]:
        """The callable the judge times, with the candidate's loop, in place of the task's ``Model``."""


# -- reward -------------------------------------------------------------------------------------
@runtime_checkable
class Reward(Protocol):
    """Turns a verdict into a number. Optional: ``name``, the label of the value in results."""

    def __call__(self, result: EvalResult) -> float:
        """The reward of ``result`` (failed results included: the milestone reward gives -1)."""


# -- guard --------------------------------------------------------------------------------------
@runtime_checkable
class Guard(Protocol):
    """An anti-reward-hacking check, made with the options of kag.core.eval.orchestrator.guarding.GuardOptions.

    A guard has a ``name`` and one or more of the checks (``StaticGuard``, ``BuildGuard``,
    ``ObservationGuard``); the runner calls whichever it has, and only guards with
    ``check_observations`` run in the judge.
    """

    name: str  # the guard of the Violations it reports


@runtime_checkable
class StaticGuard(Guard, Protocol):
    def check_solution(self, solution: Solution, task: Task) -> list[Violation]:
        """Flags in the solution's sources, before the build."""


@runtime_checkable
class BuildGuard(Guard, Protocol):
    def check_build(self, module_path: str, info: RunInfo) -> list[Violation]:
        """Flags in the built module (its imported symbols), after the build and before any of
        it runs; static, like ``check_solution``: off with the static guards."""


@runtime_checkable
class ObservationGuard(Guard, Protocol):
    def check_observations(self, observations: Observations, info: RunInfo) -> list[Violation]:
        """Flags in what a profiler saw the candidate's calls do, run in the judge."""


# -- tolerance ----------------------------------------------------------------------------------
@runtime_checkable
class Tolerance(Protocol):
    """How close the candidate's outputs must be to the reference's."""

    def tolerance(self, dtype: Any) -> tuple[float, float]:
        """(atol, rtol) for outputs of ``dtype``: an element passes when
        ``|out - ref| <= atol + rtol * |ref|``."""


# -- policy -------------------------------------------------------------------------------------
@runtime_checkable
class Policy(Protocol):
    """A model backend. Optional: ``reset(task=NAME)``, called at the start of each episode."""

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyStep:
        """The next assistant message (no tool calls: the model is done), with tokens when known."""


# -- algorithm ----------------------------------------------------------------------------------
@runtime_checkable
class Algorithm(Protocol):
    """A training stage, made with ``config_data`` (the config's TOML tables), ``stage``, ``where``
    (the config's path, for messages) and ``plugins`` (kag.cli.train_cmd.run_stage)."""

    def run(self) -> dict[str, Any]:
        """Train; return the summary ``kag train`` prints."""


# -- backend ------------------------------------------------------------------------------------
@runtime_checkable
class Backend(Protocol):
    """What build.py needs from a backend plugin (see kag/plugins/backends/). ``device`` ("cuda"
    or "cpu") is also read from the factory itself, before any backend is made. Optional:
    ``module_suffix`` (the built module's file suffix; default the interpreter's extension suffix)
    and ``fixed_units`` (the fixed sources built with every solution; default ``("binding.cpp",)``)."""

    name: str
    device: str

    def toolchain_id(self) -> str: ...

    def source_kind(self, rel: str) -> str: ...

    def compile_command(self, kind: str, source: str, obj: str) -> list[str]: ...

    def link_command(self, objects: list[str], out: str, sources_text: str) -> list[str]: ...


# -- environment --------------------------------------------------------------------------------
@runtime_checkable
class Environment(Protocol):
    """What RL stages train against (kag.core.agent.environment). Optional: ``truncate()``, called when the
    trainer's budget ends an episode; it returns a StepResult whose reward is added, or None."""

    def sample_tasks(self, n: int, rng: random.Random) -> list[Any]:
        """n tasks to start episodes from (any picklable value the env's ``reset`` accepts)."""

    def reset(self, task: Any) -> list[Message]:
        """Start an episode on ``task``; return the prompt messages."""

    def step(self, action: str) -> StepResult | tuple[list[Message] | None, float, bool]:
        """Apply the model's action text; return (observation messages or None, reward, done)."""


# -- data: crawler, composer, filter ------------------------------------------------------------
@runtime_checkable
class Crawler(Protocol):
    """Finds seed operators for ``kag data crawl``."""

    def crawl(self) -> CrawlResult:
        """The seeds, how many candidates it looked at, and why the others failed or were skipped."""


@runtime_checkable
class Composer(Protocol):
    """Stacks seed operators into fused tasks for ``kag data compose``."""

    def params(self) -> dict[str, Any]:
        """The settings the manifest records; a finished stage is reused only when they match."""

    def compose(self, seeds: list[Seed], bucket: str, index: int, seed: int = 0) -> ComposedTask:
        """The task of one attempt at one slot; raises kag.core.data.synthesis.ComposeError to reject it."""


@runtime_checkable
class ExecutionFilter(Protocol):
    """The ``filter`` stage's filter (``kag data filter --filter NAME``, default ``exec``), made with the
    stage's options (``device``, ``workers``, ``timeout_s``, ``window_ms``, ``compile_backend``).
    Optional: ``run_on(executor, items)``, the same verdicts from an executor's workers (without it the
    filter runs only on this machine)."""

    device: str
    slots: list[str]  # one per worker

    def params(self) -> dict[str, Any]:
        """The settings the manifest records; a finished stage is reused only when they match."""

    def run(self, items: Iterable[tuple[str, str]]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, code) pairs in; (id, verdict) pairs out, ``verdict["ok"]`` saying whether to keep it."""


@runtime_checkable
class DecontamFilter(Protocol):
    """The ``decontam`` stage's filter: ``kag data decontam/build --decontam NAME`` (default the built-in
    ``decontam``) creates it with ``threshold=`` and its ``[filters.NAME]`` options from kag.toml."""

    reference: list[Any]  # the benchmark tasks added so far

    def add_reference(self, items: Iterable[tuple[str, str]]) -> None:
        """(name, code) pairs of the benchmark that tasks must not resemble."""

    def score(self, code: str) -> tuple[float, str | None]:
        """The similarity to the closest reference task, and its name."""

    def keep(self, score: float) -> bool: ...

    def write_report(self, scores: list[float], out_dir: Path, extra: dict[str, Any] | None = None) -> None:
        """The histogram and numbers of a decontamination run, in ``out_dir``."""


# -- executor -----------------------------------------------------------------------------------
@runtime_checkable
class Executor(Protocol):
    """Runs jobs (kag.core.executor.Job: a kag function's name and plain data) where it likes:
    threads here (``local``), workers of a cluster (``ray``). Optional: ``check_available``."""

    stats: Any  # kag.core.executor.ExecutorStats of the last run: workers, retries, lost workers

    def map_unordered(self, jobs: Iterable[Any], workers: int | None = None, gpu: bool = False) -> Iterator[Any]:
        """JobOutcomes in completion order; ``gpu``: each worker needs a GPU of its own. Closing
        the iterator early (Ctrl-C) stops the work without waiting for what is in flight."""

    def session(self, workers: int | None = None, gpu: bool = False) -> Any:
        """Workers held until ``close()`` (a context manager) whose ``call(job)`` runs one job and
        returns its JobOutcome, safe to call from many threads at once (an RL stage's environments)."""


# -- logger -------------------------------------------------------------------------------------
@runtime_checkable
class MetricSink(Protocol):
    """One stage's metrics, step by step, to a tracker (TensorBoard, wandb). Optional:
    ``check_available``. Only rank 0 of a data-parallel run makes one."""

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """The step's numbers (finite floats and ints only)."""

    def close(self) -> None:
        """Flush and release; called once when the stage ends (also after Ctrl-C)."""


# A filter serves the stage that creates it by name, so the kind has one contract per stage.
Filter = ExecutionFilter | DecontamFilter

# kind -> what its factories make, in kag.core.hookspecs.KIND_HOOKS order.
KIND_CONTRACTS: dict[str, Any] = {
    "dataset": Dataset,
    "tool": AgentTool,
    "sandbox": Sandbox,
    "baseline": Baseline,
    "reward": Reward,
    "guard": StaticGuard | ObservationGuard,
    "tolerance": Tolerance,
    "policy": Policy,
    "algorithm": Algorithm,
    "backend": Backend,
    "environment": Environment,
    "crawler": Crawler,
    "composer": Composer,
    "filter": Filter,
    "executor": Executor,
    "logger": MetricSink,
}
