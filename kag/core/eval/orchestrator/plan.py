"""One evaluation's plugin choices, resolved once before it starts (trusted side, the orchestrator).

``evaluate`` asks the plugin registry here and nowhere else: the backend, the tolerance policy, the
guards (each created once, with its options), the baselines and the reward. A misnamed plugin, or a
guard that refuses its options, fails here, before anything is built; the phases after read the plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from kag.core.records import Solution, Task, Violation

if TYPE_CHECKING:
    from kag.core.eval.orchestrator.evaluate import EvalOptions
    from kag.core.plugins import Plugins


@attrs.define
class EvalPlan:
    """What one evaluation runs with, by plugin."""

    device: str  # the torch device of the backend ("cuda" or "cpu")
    backend_name: str
    tolerance: str
    guard_options: dict[str, Any]  # every guard's options (the tolerance policy's among them)
    guards: list[tuple[str, Any]]  # (name, the guard), in the order they were chosen
    baselines: list[tuple[str, str]]  # (baseline, compile mode)
    plugin_selection: dict[str, Any]  # what the judge rebuilds its plugins from
    guard_builtins: list[str]  # built-in modules of guards the default registry lacks
    reward: Any = None  # the reward plugin; None when nothing is checked
    plugins: Any = None  # the registry, for the backend made when a build needs it
    _backend: Any = None

    def runtime_guards(self) -> list[str]:
        """The guards that also judge what the candidate's calls did (in the judge)."""
        return [name for name, guard in self.guards if callable(getattr(guard, "check_observations", None))]

    def backend(self) -> Any:
        """The backend plugin (made on first use: a solution with nothing to build needs none)."""
        if self._backend is None:
            self._backend = self.plugins.create("backend", self.backend_name)
        return self._backend

    def static_violations(self, task: Task, solution: Solution) -> list[Violation]:
        """Every guard's ``check_solution`` on the sources."""
        return guard_violations(self.guards, "check_solution", solution, task)

    def build_violations(self, extension_path: str | None) -> list[Violation]:
        """Every guard's ``check_build`` on the built module (its imported symbols)."""
        from kag.core.eval.orchestrator.guarding import RunInfo

        if extension_path is None:
            return []
        opts = self.guard_options
        info = RunInfo(device=self.device, extension_path=extension_path,
                       allow_cublas=bool(opts.get("allow_cublas", True)), allow_cudnn=bool(opts.get("allow_cudnn", True)))
        return guard_violations(self.guards, "check_build", extension_path, info)


def guard_violations(guards: list[tuple[str, Any]], method: str, *args: Any) -> list[Violation]:
    """Each guard's ``method`` (where it has one) on ``args``, its findings as violations."""
    found: list[Violation] = []
    for name, guard in guards:
        check = getattr(guard, method, None)
        if callable(check):
            for v in check(*args) or []:
                found.append(v if isinstance(v, Violation) else Violation(guard=name, detail=str(v)))
    return found


def make_guards(plugins: Plugins, names: tuple[str, ...] | list[str] | None,
                options: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The chosen guards (every selected one where ``names`` is None), each made with ``options``."""
    chosen = plugins.selected_all("guard") if names is None else names
    guards = []
    for name in chosen:
        try:
            guards.append((name, plugins.create("guard", name, **(options or {}))))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"guard {name!r} rejects the guard options {options}: {exc} (EvalOptions.guard_options "
                             f"takes allow_cublas, allow_cudnn; tolerance comes from the tolerance policy)") from exc
    return guards


def resolve(options: EvalOptions, plugins: Plugins) -> EvalPlan:
    """Every plugin choice of an evaluation, made now."""
    from kag.core.eval.orchestrator.evaluate import backend_device, guard_builtins, guard_options, tolerance_name

    tolerance = tolerance_name(options, plugins)
    opts = guard_options(options, plugins)
    guards = make_guards(plugins, options.guards, opts)
    baselines = []
    for name in options.baselines:
        plugins.entry("baseline", name)
        baselines.append((name, options.baseline_mode(name)))
    plan = EvalPlan(device=backend_device(options.backend, plugins), backend_name=options.backend,
                    tolerance=tolerance, guard_options=opts, guards=guards, baselines=baselines,
                    plugin_selection=plugins.names_selected(), guard_builtins=[], plugins=plugins)
    plan.guard_builtins = guard_builtins(plugins, plan.runtime_guards())
    if options.do_correctness:
        plan.reward = plugins.create("reward", options.reward) if options.reward else plugins.create("reward")
    return plan
