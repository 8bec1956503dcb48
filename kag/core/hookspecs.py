"""Hook specifications: one registration hook per plugin kind.

Each hook receives a ``register(name, factory)`` callback (in the style of simonw's llm), so one
plugin can contribute many named items and the core keeps the name -> factory registry. Built-in
plugins implement these hooks exactly as a third-party package would.
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
}
KINDS: tuple[str, ...] = tuple(KIND_HOOKS)


@hookspec
def kag_register_datasets(register: Register) -> None:
    """Register task sources: ``register("kernelbench", KernelBenchDataset)``."""


@hookspec
def kag_register_tools(register: Register) -> None:
    """Register agent tools (bash, read, write, ...)."""


@hookspec
def kag_register_sandboxes(register: Register) -> None:
    """Register sandboxes that hold an episode's workspace and run its commands."""


@hookspec
def kag_register_baselines(register: Register) -> None:
    """Register baselines the candidate is timed against (eager, torch.compile modes)."""


@hookspec
def kag_register_rewards(register: Register) -> None:
    """Register rewards that turn an EvalResult into a number."""


@hookspec
def kag_register_guards(register: Register) -> None:
    """Register anti-reward-hacking checks (static and at run time)."""


@hookspec
def kag_register_tolerances(register: Register) -> None:
    """Register correctness tolerance policies (cuda-agent, strict)."""


@hookspec
def kag_register_policies(register: Register) -> None:
    """Register policies (model backends) that choose the agent's next action."""


@hookspec
def kag_register_algorithms(register: Register) -> None:
    """Register training algorithms and stages (ppo, rft, value pretraining)."""


@hookspec
def kag_register_backends(register: Register) -> None:
    """Register build/run backends (cuda, cpu)."""


@hookspec
def kag_register_environments(register: Register) -> None:
    """Register RL environments (see kag.core.environment: reset(task), step(action))."""


@hookspec
def kag_register_crawlers(register: Register) -> None:
    """Register seed-operator crawlers for ``kag data crawl`` (torch, transformers)."""


@hookspec
def kag_register_composers(register: Register) -> None:
    """Register composers that stack seed operators into fused tasks (rule, llm)."""


@hookspec
def kag_register_filters(register: Register) -> None:
    """Register task filters of ``kag data`` (exec: run-based checks, decontam: benchmark overlap)."""


@hookspec
def kag_register_commands(cli: Any) -> None:
    """Add click commands to the ``kag`` command group."""
