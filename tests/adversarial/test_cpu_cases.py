"""End to end: every CPU case of the corpus through ``kag.core.eval.evaluate.evaluate`` (real build, real
judge and candidate processes) gets the verdict the manifest expects; honest ones pass."""

from __future__ import annotations

import pytest

from tests.adversarial.cases import Case, cases
from tests.adversarial.conftest import guard_plugins
from tests.adversarial.runner import describe, evaluator_ready, matches, run_case

NOT_READY = evaluator_ready()
pytestmark = pytest.mark.skipif(NOT_READY is not None, reason=NOT_READY or "")


# Each built case costs ~15-40 s on 2 cores; these run in the default suite, the rest are `slow`.
QUICK = {"getattr_torch_op", "decoy_kernel", "first_calls_only", "segfault_binding", "os_exit_runtime",
         "zero_inputs", "example_relu", "host_memory_exhaustion", "seed_prediction"}


def _params(items: list[Case]) -> list:
    quick = lambda c: c.static or c.family or c.name in QUICK  # noqa: E731
    return [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow or not quick(c) else []) for c in items]


@pytest.mark.parametrize("case", _params(cases("cpu")))
def test_cpu_case_verdict(case: Case, tmp_path_factory) -> None:
    """The issue 12/13 families run with every static guard off: the runtime defences alone."""
    static = not case.family
    result = run_case(case, guard_plugins(), do_timing=case.name in ("first_calls_only", "stdout_flood"),
                      static_guards=static)
    assert matches(case, result, static_guards=static), \
        f"{case.id}: expected {case.expect} {case.detail!r}, got {describe(result, case)}"
