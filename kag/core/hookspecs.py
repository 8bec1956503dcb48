"""Hook specifications: one registration hook per plugin kind.

Each hook receives a ``register(name, factory)`` callback (in the style of simonw's llm), so one
plugin can contribute many named items and the core keeps the name -> factory registry. Built-in
plugins implement these hooks exactly as a third-party package would. Each hook's docstring names
the Protocol of kag.core.contracts that its factories' products must satisfy.
"""

from __future__ import annotations

from typing import Any, Callable

import pluggy

PROJECT = "kag"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Register = Callable[..., None]

# kind -> registration hook name. The order is the order `kag plugins` lists them in.
KIND_HOOKS: dict[str, str] = {
    "dataset": "kag_register_datasets",
    "tool": "kag_register_tools",
    "sandbox": "kag_register_sandboxes",
    "baseline": "kag_register_baselines",
    "reward": "kag_register_rewards",
    "guard": "kag_register_guards",
    "tolerance": "kag_register_tolerances",
    "policy": "kag_register_policies",
    "algorithm": "kag_register_algorithms",
    "backend": "kag_register_backends",
    "environment": "kag_register_environments",
    "crawler": "kag_register_crawlers",
    "composer": "kag_register_composers",
    "filter": "kag_register_filters",
    "executor": "kag_register_executors",
    "logger": "kag_register_loggers",
}
KINDS: tuple[str, ...] = tuple(KIND_HOOKS)


@hookspec
def kag_register_datasets(register: Register) -> None:
    """Register task sources: ``register(name, factory: Callable[..., Dataset])``, e.g.
    ``register("kernelbench", KernelBenchDataset)``."""


@hookspec
def kag_register_tools(register: Register) -> None:
    """Register agent tools (bash, read, write, ...): ``register(name, factory: Callable[..., AgentTool])``."""


@hookspec
def kag_register_sandboxes(register: Register) -> None:
    """Register sandboxes that hold an episode's workspace and run its commands:
    ``register(name, factory: Callable[..., Sandbox])``; ``start`` returns a ``SandboxHandle``."""


@hookspec
def kag_register_baselines(register: Register) -> None:
    """Register baselines the candidate is timed against (eager, torch.compile modes):
    ``register(name, factory: Callable[..., Baseline])``."""


@hookspec
def kag_register_rewards(register: Register) -> None:
    """Register rewards that turn an EvalResult into a number: ``register(name, factory: Callable[..., Reward])``."""


@hookspec
def kag_register_guards(register: Register) -> None:
    """Register anti-reward-hacking checks (static and at run time):
    ``register(name, factory: Callable[..., Guard])``, a Guard that is a ``StaticGuard``, an
    ``ObservationGuard`` or both."""


@hookspec
def kag_register_tolerances(register: Register) -> None:
    """Register correctness tolerance policies (cuda-agent, strict):
    ``register(name, factory: Callable[..., Tolerance])``."""


@hookspec
def kag_register_policies(register: Register) -> None:
    """Register policies (model backends) that choose the agent's next action:
    ``register(name, factory: Callable[..., Policy])``."""


@hookspec
def kag_register_algorithms(register: Register) -> None:
    """Register training algorithms and stages (ppo, rft, value pretraining):
    ``register(name, factory: Callable[..., Algorithm])``."""


@hookspec
def kag_register_backends(register: Register) -> None:
    """Register build/run backends (cuda, cpu): ``register(name, factory: Callable[..., Backend])``."""


@hookspec
def kag_register_environments(register: Register) -> None:
    """Register RL environments (see kag.core.agent.environment: reset(task), step(action)):
    ``register(name, factory: Callable[..., Environment])``."""


@hookspec
def kag_register_crawlers(register: Register) -> None:
    """Register seed-operator crawlers for ``kag data crawl`` (torch, transformers):
    ``register(name, factory: Callable[..., Crawler])``."""


@hookspec
def kag_register_composers(register: Register) -> None:
    """Register composers that stack seed operators into fused tasks (rule, llm):
    ``register(name, factory: Callable[..., Composer])``."""


@hookspec
def kag_register_filters(register: Register) -> None:
    """Register task filters of ``kag data`` (exec: run-based checks, decontam: benchmark overlap):
    ``register(name, factory: Callable[..., Filter])``, the stage's ``ExecutionFilter`` or ``DecontamFilter``."""


@hookspec
def kag_register_executors(register: Register) -> None:
    """Register executors that run ``kag eval``'s episodes, ``kag data filter``'s checks and the RL
    stages' evaluations (local threads, a Ray cluster):
    ``register(name, factory: Callable[..., Executor])``."""


@hookspec
def kag_register_loggers(register: Register) -> None:
    """Register where the RL stages' per-step metrics go besides their ``metrics.jsonl`` (always
    written: the reports read it): TensorBoard, Weights & Biases, your own tracker:
    ``register(name, factory: Callable[..., MetricSink])``, called with ``out_dir``, ``stage``,
    ``config`` (the stage's settings as a dict) and the ``[loggers.NAME]`` options."""


@hookspec
def kag_register_commands(cli: Any) -> None:
    """Add click commands to the ``kag`` command group."""
