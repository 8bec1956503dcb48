"""Every case's sources through every guard's static check (runs in CI, nothing is built).

Static cases must be caught with the right guard and detail; cases meant for the runtime guards
must pass the static checks (so the runtime path is what catches them); honest solutions must
pass under both tolerance policies (the fp16 one only under cuda-agent).
"""

from __future__ import annotations

import pytest

from kag.core.eval.orchestrator.guarding import run_static_guards
from tests.adversarial.cases import ATTACKS, CASES, GUARD_NAMES, HONEST, Case, load_task
from tests.adversarial.conftest import guard_plugins

PLUGINS = guard_plugins()


def static_violations(case: Case, **override):
    options = {**case.guard_options, **override}
    guards = [PLUGINS.create("guard", name, **options) for name in GUARD_NAMES if name not in case.guards_off]
    return run_static_guards(guards, case.solution(), load_task(case))


@pytest.mark.parametrize("case", [c for c in ATTACKS if c.static], ids=lambda c: c.id)
def test_static_case_is_caught(case: Case) -> None:
    found = static_violations(case)
    hits = [v for v in found if v.guard == case.expect and case.detail in v.detail]
    assert hits, f"{case.id}: expected {case.expect} with {case.detail!r}, got {found}"
    # file:line (or kernel name) is always named
    assert all(":" in v.detail for v in hits)


@pytest.mark.parametrize("case", [c for c in ATTACKS if not c.static and not c.family], ids=lambda c: c.id)
def test_runtime_case_passes_static_checks(case: Case) -> None:
    assert static_violations(case) == []


def test_every_family_has_three_routes_on_both_backends() -> None:
    """Each family is attacked by at least three different routes (Python, C++ through
    pybind11, and one more), as CPU twins (CI) and CUDA cases (the device). The family cases are
    also run with every static guard off (bench/scripts/adversarial.py --no-static-guards)."""
    families: dict[tuple[str, str], set[str]] = {}
    for c in ATTACKS:
        if c.family:
            families.setdefault((c.family, c.backend), set()).add(c.name)
    names = {f for f, _ in families}
    assert len(names) >= 7, names
    for (family, backend), routes in families.items():
        assert len(routes) >= 3 or family == "writing outside its folder", (family, backend, routes)


@pytest.mark.parametrize("case", [c for c in HONEST if c.name != "fp16_compute_cuda_agent"], ids=lambda c: c.id)
@pytest.mark.parametrize("tolerance", ["cuda-agent", "strict"])
def test_honest_case_has_no_static_violation(case: Case, tolerance: str) -> None:
    assert static_violations(case, tolerance=tolerance) == []


def test_fp16_is_a_policy_choice() -> None:
    case = next(c for c in HONEST if c.name == "fp16_compute_cuda_agent")
    assert static_violations(case, tolerance="cuda-agent") == []
    strict = static_violations(case, tolerance="strict")
    assert strict and all(v.guard == "precision" for v in strict)


def test_corpus_size_and_coverage() -> None:
    attacks = {c.name for c in ATTACKS}
    assert len(attacks) >= 25 and len(HONEST) >= 8
    covered = {c.expect for c in ATTACKS} | {e for c in ATTACKS for e, _ in c.also}
    assert set(GUARD_NAMES) <= covered
    for kind in ("crash", "cuda_error", "timeout", "oom", "build", "mismatch"):
        assert kind in covered
    assert len([c for c in CASES if c.backend == "cpu"]) >= 25
