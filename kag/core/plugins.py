"""The plugin manager: built-ins and entry-point plugins, registered the same way, selected by name.

Built-in plugins are listed in ``DEFAULT_PLUGINS`` and registered through the same ``@hookimpl``
path as third-party packages found in the ``kag`` entry-point group (pytest's default-plugin tuple,
llm's ``register`` callbacks). Worker processes rebuild a manager from plain names with
``Plugins.from_names``: plugin objects never cross a process boundary.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as md
import os
import re
from typing import Any, Callable, Iterable, Mapping

import attrs
import pluggy

from kag.core import hookspecs
from kag.core.hookspecs import KIND_HOOKS, KINDS, PROJECT

ENTRY_POINT_GROUP = "kag"
BUILTIN = "built-in"

DEFAULT_PLUGINS: tuple[str, ...] = (
    "kag.plugins.datasets.kernelbench",
    "kag.plugins.datasets.ops6k",
    "kag.plugins.datasets.local",
    "kag.plugins.rewards.milestone",
    "kag.plugins.rewards.speedup",
    "kag.plugins.data.crawl_torch",
    "kag.plugins.data.crawl_transformers",
    "kag.plugins.data.compose_rule",
    "kag.plugins.data.compose_llm",
    "kag.plugins.data.filter_exec",
    "kag.plugins.data.decontam",
    "kag.plugins.backends.cuda",
    "kag.plugins.backends.cpu",
    "kag.plugins.backends.nvrtc",
    "kag.plugins.algorithms.ppo",
    "kag.plugins.environments.toy_env",
    "kag.plugins.environments.kernel_env",
    "kag.plugins.environments.choice_env",
    "kag.plugins.loggers.trackers",
    "kag.plugins.baselines.torch_baselines",
    "kag.plugins.tolerances.rules",
    "kag.plugins.tools.bash",
    "kag.plugins.tools.files",
    "kag.plugins.tools.search",
    "kag.plugins.tools.todo",
    "kag.plugins.sandboxes.local",
    "kag.plugins.sandboxes.docker",
    "kag.plugins.policies.replay",
    "kag.plugins.policies.openai_http",
    "kag.plugins.policies.human",
    "kag.plugins.policies.hf",
    "kag.plugins.policies.vllm_engine",
    "kag.plugins.guards.torch_fallback",
    "kag.plugins.guards.provenance",
    "kag.plugins.guards.output_reuse",
    "kag.plugins.guards.hidden_work",
    "kag.plugins.guards.tampering",
    "kag.plugins.guards.precision",
    "kag.plugins.executors.local",
    "kag.plugins.executors.ray_cluster",
)

# The name a kind resolves to when nothing selects one. Kinds listed in MULTI_KINDS are
# collections (every registered item is on unless switched off), so they have no single default.
KIND_DEFAULTS: dict[str, str] = {
    "dataset": "kernelbench",
    "sandbox": "local",
    "baseline": "compile",
    "reward": "milestone",
    "tolerance": "cuda-agent",
    "policy": "replay",
    "algorithm": "ppo",
    "backend": "auto",  # decided per machine: AUTO_DEFAULTS
    "composer": "rule",
    "executor": "local",
}


def _auto_backend() -> str:
    from kag.core.eval.orchestrator.gpu_pool import pick_backend  # no torch import: torch/version.py and NVML

    return pick_backend("auto")


# Defaults that depend on the machine: the cuda backend where it can run, else cpu (what every
# command's --backend auto picks, so `kag workspace` and `kag plugins` agree with `kag score`).
AUTO_DEFAULTS = {"backend": _auto_backend}
MULTI_KINDS = frozenset({"tool", "guard"})


class PluginError(Exception):
    """A plugin selection or registration problem, with a message a user can act on."""


@attrs.frozen
class PluginEntry:
    """One registered item: a named factory of some kind, and where it came from."""

    kind: str
    name: str
    factory: Callable[..., Any]
    origin: str
    plugin: str

    def availability(self) -> str | None:
        """None when the item can run on this machine, else why not (e.g. no Docker daemon)."""
        check = getattr(self.factory, "check_available", None)
        if check is None:
            return None
        try:
            return check()
        except Exception as exc:  # a broken check must not break `kag plugins`
            return f"availability check failed: {exc}"


def _env_list(var: str) -> set[str] | None:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {item.strip() for item in raw.split(",") if item.strip()}


class Plugins:
    """The registry of every kind's named items, plus the current selection."""

    def __init__(self, load_entrypoints: bool = True, builtins: Iterable[str] = DEFAULT_PLUGINS):
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.origins: dict[str, str] = {}
        self.disable_names: dict[str, str] = {}  # entry-point plugin -> the KAG_DISABLE_PLUGINS value that skips it
        self.selection: dict[str, tuple[str, ...]] = {}
        for modname in builtins:
            self.pm.register(importlib.import_module(modname), name=modname)
            self.origins[modname] = BUILTIN
        if load_entrypoints:
            self._load_entrypoints()
        self._check_hooks()
        self.registry: dict[str, dict[str, PluginEntry]] = {kind: {} for kind in KINDS}
        for kind in KINDS:
            self._collect(kind)

    # -- discovery ---------------------------------------------------------------------------
    def _load_entrypoints(self) -> None:
        allow = _env_list("KAG_LOAD_PLUGINS")
        block = _env_list("KAG_DISABLE_PLUGINS") or set()
        for ep in md.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist is not None else "?"
            names = {ep.name, dist}
            if allow is not None and not names & allow:
                continue
            if names & block:
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginError(
                    f"the kag plugin {ep.name!r} from {dist} failed to import: {exc}. "
                    f"Fix or uninstall it, or set KAG_DISABLE_PLUGINS={ep.name}"
                ) from exc
            name = f"{dist}:{ep.name}"
            if self.pm.is_registered(plugin) or self.pm.has_plugin(name):
                continue
            self.pm.register(plugin, name=name)
            version = ep.dist.version if ep.dist is not None else "?"
            self.origins[name] = f"{dist} {version}"
            self.disable_names[name] = ep.name

    def _check_hooks(self) -> None:
        """A hook implementation that no hook specification names (a misspelled hook) is an error:
        pluggy would otherwise never call it, and the plugin's items would silently be missing."""
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            name = self.pm.get_name(exc.plugin) or repr(exc.plugin)
            origin = self.origins.get(name, name)
            found = re.search(r"unknown hook '([^']+)'", str(exc))
            hook = found.group(1) if found else "?"
            known = [n for n in vars(hookspecs) if n.startswith(f"{PROJECT}_")]
            close = difflib.get_close_matches(hook, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"the hooks are: {', '.join(known)}."
            skip = f" or set KAG_DISABLE_PLUGINS={self.disable_names[name]}" if name in self.disable_names else ""
            raise PluginError(f"the kag plugin {name!r} ({origin}) implements the unknown hook {hook!r}: "
                              f"{hint} Fix the name{skip}") from None

    def _collect(self, kind: str) -> None:
        hook = getattr(self.pm.hook, KIND_HOOKS[kind])
        for impl in hook.get_hookimpls():
            origin = self.origins.get(impl.plugin_name, impl.plugin_name)

            def register(name: str, factory: Callable[..., Any], _impl=impl, _origin=origin) -> None:
                known = self.registry[kind].get(name)
                if known is not None:
                    raise PluginError(
                        f"two plugins register the {kind} {name!r}: {known.origin} "
                        f"({known.plugin}) and {_origin} ({_impl.plugin_name}); "
                        f"disable one with KAG_DISABLE_PLUGINS"
                    )
                self.registry[kind][name] = PluginEntry(kind, name, factory, _origin, _impl.plugin_name)

            impl.function(register=register)

    def register_plugin(self, plugin: object, name: str, origin: str = "runtime") -> None:
        """Register a plugin object after start-up (tests, notebooks) and collect its items."""
        self.pm.register(plugin, name=name)
        self.origins[name] = origin
        try:
            self._check_hooks()
        except PluginError:
            self.pm.unregister(name=name)
            raise
        self.registry = {kind: {} for kind in KINDS}
        for kind in KINDS:
            self._collect(kind)

    def add_commands(self, cli: Any) -> None:
        self.pm.hook.kag_register_commands(cli=cli)

    # -- lookup and selection ----------------------------------------------------------------
    def _check_kind(self, kind: str) -> None:
        if kind not in self.registry:
            raise PluginError(f"unknown plugin kind {kind!r}; the kinds are: {', '.join(KINDS)}")

    def names(self, kind: str) -> list[str]:
        self._check_kind(kind)
        return sorted(self.registry[kind])

    def entry(self, kind: str, name: str) -> PluginEntry:
        self._check_kind(kind)
        try:
            return self.registry[kind][name]
        except KeyError:
            valid = ", ".join(self.names(kind)) or "(none installed)"
            raise PluginError(f"unknown {kind} {name!r}; the {kind} plugins are: {valid}") from None

    def select(self, selections: Mapping[str, str | Iterable[str]]) -> None:
        """Set the chosen names per kind (later calls override earlier ones kind by kind).

        For collection kinds (tools, guards) the value is a comma list; ``-NAME`` switches one
        item off while keeping the rest.
        """
        for kind, value in selections.items():
            self._check_kind(kind)
            items = [value] if isinstance(value, str) else list(value)
            names = [n.strip() for item in items for n in item.split(",") if n.strip()]
            if kind not in MULTI_KINDS and len(names) != 1:
                raise PluginError(f"choose exactly one {kind}, got {value!r}")
            if kind in MULTI_KINDS and names and all(n.startswith("-") for n in names):
                removed = {n[1:] for n in names}
                for n in removed:
                    self.entry(kind, n)
                base = self.selection.get(kind, tuple(self.names(kind)))
                self.selection[kind] = tuple(n for n in base if n not in removed)
                continue
            for n in names:
                self.entry(kind, n.lstrip("-"))
            self.selection[kind] = tuple(n for n in names if not n.startswith("-"))

    def selected(self, kind: str) -> str:
        """The one name chosen for a single-choice kind."""
        self._check_kind(kind)
        if kind in MULTI_KINDS:
            raise PluginError(f"{kind} is a collection; use selected_all({kind!r})")
        chosen = self.selection.get(kind)
        if chosen:
            return chosen[0]
        default = KIND_DEFAULTS.get(kind)
        if default == "auto" and kind in AUTO_DEFAULTS:
            default = AUTO_DEFAULTS[kind]()
        if default is None or default not in self.registry[kind]:
            valid = ", ".join(self.names(kind)) or "(none installed)"
            raise PluginError(f"no {kind} selected; choose one with --plugin {kind}=NAME from: {valid}")
        return default

    def selected_all(self, kind: str) -> tuple[str, ...]:
        self._check_kind(kind)
        return self.selection.get(kind, tuple(self.names(kind)))

    def create(self, kind: str, name: str | None = None, /, **options: Any) -> Any:
        """Instantiate the chosen (or named) item of a kind with its options."""
        return self.entry(kind, name or self.selected(kind)).factory(**options)

    def names_selected(self) -> dict[str, list[str]]:
        """Plain-data form of the selection, to rebuild the same choice in another process."""
        return {kind: list(names) for kind, names in self.selection.items()}

    @classmethod
    def from_names(cls, selection: Mapping[str, Iterable[str]], load_entrypoints: bool = True) -> "Plugins":
        plugins = cls(load_entrypoints=load_entrypoints)
        plugins.select({kind: list(names) for kind, names in selection.items()})
        return plugins


def parse_plugin_options(pairs: Iterable[str]) -> dict[str, str]:
    """Parse repeated ``KIND=NAME`` command-line values into a mapping."""
    out: dict[str, str] = {}
    for pair in pairs:
        kind, sep, name = pair.partition("=")
        if not sep or not kind.strip() or not name.strip():
            raise PluginError(f"--plugin takes KIND=NAME, got {pair!r} (e.g. --plugin reward=milestone)")
        kind = kind.strip()
        if kind not in KIND_HOOKS:
            raise PluginError(f"unknown plugin kind {kind!r}; the kinds are: {', '.join(KINDS)}")
        out[kind] = name.strip() if kind not in out else f"{out[kind]},{name.strip()}"
    return out
