"""Every built-in plugin's product satisfies its kind's contract (kag.core.contracts).

Products that are cheap to make are made and checked with ``isinstance``; those that need model
weights or a dataset are checked on their class. A built-in this file does not know fails the
test, so a new one gets checked too.
"""

from __future__ import annotations

import inspect
import types
from pathlib import Path
from typing import Any, Callable, Protocol

import pytest

from kag.core import hookspecs
from kag.core.contracts import KIND_CONTRACTS, Guard, ObservationGuard, SandboxHandle, StaticGuard
from kag.core.hookspecs import KIND_HOOKS, KINDS
from kag.core.plugins import Plugins
from kag.plugins.guards import GUARD_MODULES

PLUGINS = Plugins(load_entrypoints=False)
NAMED_KINDS = {"tool", "guard", "backend"}  # the core reads their ``name``: it must be the registered one
CHOICES = Path(__file__).resolve().parents[2] / "examples" / "train" / "kernel_choice"


def _dataset_options(tmp: Any) -> dict[str, dict[str, Any]]:
    (tmp / "kb" / "level1").mkdir(parents=True)
    (tmp / "task.py").write_text("")
    (tmp / "ops.parquet").write_text("")
    return {"kernelbench": {"path": str(tmp / "kb")}, "ops6k": {"path": str(tmp / "ops.parquet")},
            "local": {"path": str(tmp / "task.py")}}


# (kind, name) -> options to make it with; None: checked on its class (needs weights or a dataset)
def _recipes(tmp: Any) -> dict[tuple[str, str], dict[str, Any] | None]:
    out: dict[tuple[str, str], dict[str, Any] | None] = {
        ("dataset", name): opts for name, opts in _dataset_options(tmp).items()}
    simple = {"tool": PLUGINS.names("tool"), "sandbox": ["local", "docker"], "reward": ["milestone", "speedup"],
              "guard": PLUGINS.names("guard"), "tolerance": ["cuda-agent", "strict"], "policy": ["human"],
              "backend": ["cuda", "cpu", "nvrtc"], "environment": ["copy-digit"], "crawler": ["torch", "transformers"],
              "composer": ["rule"], "filter": ["decontam"], "executor": ["local", "ray"]}
    out.update({(kind, name): {} for kind, names in simple.items() for name in names})
    out.update({("baseline", "eager"): {"mode": "default"}, ("baseline", "compile"): {"mode": "default"},
                ("policy", "replay"): {"calls": []},
                ("policy", "openai"): {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
                ("composer", "llm"): {"policy": "replay", "policy_options": {"calls": []}, "plugins": PLUGINS},
                ("filter", "exec"): {"device": "cpu", "workers": 1},
                ("environment", "kernel-choice"): {"path": str(CHOICES), "backend": "cpu"},
                ("logger", "tensorboard"): {"out_dir": str(tmp), "stage": "warmup"}})
    out[("logger", "wandb")] = None  # a run of its own: tests/plugins/loggers
    out.update({("policy", "hf"): None, ("policy", "vllm"): None, ("environment", "kernel-single"): None,
                ("environment", "kernel-agentic"): None})
    out.update({("algorithm", name): None for name in PLUGINS.names("algorithm")})
    return out


def _protocols(contract: Any) -> list[type]:
    return list(contract.__args__) if isinstance(contract, types.UnionType) else [contract]


def _members(proto: type) -> set[str]:
    """The members a Protocol declares, its Protocol bases' included."""
    out: set[str] = set()
    for base in proto.__mro__:
        if base in (Protocol, object) or not getattr(base, "_is_protocol", False):
            continue
        out |= {n for n in vars(base) if not n.startswith("_") or n == "__call__"}
        out |= set(getattr(base, "__annotations__", {}))
    return out


def _product_class(kind: str, factory: Callable[..., Any]) -> type:
    if inspect.isclass(factory):
        return factory
    assert kind == "algorithm", f"the {kind} factory {factory} is not a class: add how to find its product"
    from kag.plugins.algorithms.ppo import ppo_stage, stages

    return getattr(ppo_stage, factory.__name__, None) or getattr(stages, factory.__name__)


def _class_satisfies(cls: type, contract: Any) -> bool:
    """Whether the class defines (or inherits) every member of one of the contract's Protocols."""
    defined = {n for c in cls.__mro__ for n in (*vars(c), *getattr(c, "__annotations__", {}))}
    return any(_members(p) <= defined for p in _protocols(contract))


def test_every_kind_has_a_contract_named_in_its_hook():
    assert tuple(KIND_CONTRACTS) == KINDS
    for kind, contract in KIND_CONTRACTS.items():
        doc = getattr(hookspecs, KIND_HOOKS[kind]).__doc__
        assert "register(name, factory: Callable[..., " in doc, kind
        for proto in _protocols(contract):
            assert proto.__name__ in doc, f"{KIND_HOOKS[kind]} does not name {proto.__name__}"


@pytest.mark.parametrize("kind", KINDS)
def test_contracts_reject_an_object_without_the_members(kind):
    assert not isinstance(object(), KIND_CONTRACTS[kind])
    assert not _class_satisfies(object, KIND_CONTRACTS[kind])


def test_a_guard_needs_a_check_besides_its_name():
    class NameOnly:
        name = "n"

    assert isinstance(NameOnly(), Guard)
    assert not isinstance(NameOnly(), KIND_CONTRACTS["guard"])


def test_every_builtin_product_satisfies_its_kinds_contract(tmp_path):
    recipes = _recipes(tmp_path)
    registered = {(kind, name) for kind in KINDS for name in PLUGINS.names(kind)}
    assert registered <= set(recipes), f"built-ins this test cannot check yet: {sorted(registered - set(recipes))}"
    for kind, name in sorted(registered):
        contract, options = KIND_CONTRACTS[kind], recipes[(kind, name)]
        if options is None:
            cls = _product_class(kind, PLUGINS.entry(kind, name).factory)
            assert _class_satisfies(cls, contract), f"{kind} {name!r}: {cls} lacks a member of {contract}"
            if kind == "algorithm":
                from kag.plugins.algorithms.ppo.base import Stage

                assert cls.run is not Stage.run or cls._run is not Stage._run, \
                    f"{kind} {name!r}: {cls} implements neither run() nor _run()"
            continue
        made = PLUGINS.create(kind, name, **options)
        assert isinstance(made, contract), f"{kind} {name!r}: {type(made)} does not satisfy {contract}"
        if kind in NAMED_KINDS:
            assert made.name == name, f"{kind} {name!r} calls itself {made.name!r}"


def test_guards_are_static_observation_or_both():
    kinds = {name: (isinstance(g, StaticGuard), isinstance(g, ObservationGuard))
             for name in PLUGINS.names("guard") for g in [PLUGINS.create("guard", name)]}
    assert kinds["kernel-provenance"] == (False, True)
    assert kinds["precision"] == (True, False)
    assert kinds["no-tampering"] == (True, True)


def test_a_started_local_sandbox_gives_a_handle(tmp_path):
    (tmp_path / "ws").mkdir()
    handle = PLUGINS.create("sandbox", "local").start(tmp_path / "ws")
    try:
        assert isinstance(handle, SandboxHandle)
    finally:
        handle.close()


def test_guard_modules_are_the_builtins_that_register_guards():
    registering = {PLUGINS.entry("guard", name).plugin for name in PLUGINS.names("guard")}
    assert registering == set(GUARD_MODULES)
