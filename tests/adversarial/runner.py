"""Run one corpus case through the real evaluator and judge the verdict (CI test and device bench)."""

from __future__ import annotations

from typing import Any

import attrs

from kag.core.records import EvalResult
from tests.adversarial.cases import GUARD_NAMES, Case, load_solution, load_task

MAX_BOUNDED_OUTPUT = 1 << 20  # what a flood of stdout may leave in the result


def evaluator_ready() -> str | None:
    """None when kag.core.evaluate exists and runs the guards of kag.core.guarding, else why not."""
    try:
        import kag.core.evaluate as evaluate
    except ImportError as exc:
        return f"kag.core.evaluate is not importable yet ({exc})"
    if not getattr(evaluate, "RUNTIME_GUARDS_WIRED", False):
        return "kag.core.evaluate does not run the runtime guards yet (RUNTIME_GUARDS_WIRED is not set)"
    return None


def eval_options(case: Case, do_timing: bool, num_timed: int = 20) -> Any:
    from kag.core.evaluate import EvalOptions, Timeouts

    fields = {f.name for f in attrs.fields(EvalOptions)}
    kw: dict[str, Any] = dict(backend=case.backend, tolerance=case.tolerance, num_checks=5, do_timing=do_timing,
                              guards=tuple(n for n in GUARD_NAMES if n not in case.guards_off),
                              timeouts=attrs.evolve(Timeouts(), **case.timeouts))
    if do_timing:
        kw.update(num_timed=num_timed, warmup=3)
    if "guard_options" in fields:
        kw["guard_options"] = dict(case.guard_options)
    return EvalOptions(**{k: v for k, v in kw.items() if k in fields})


def run_case(case: Case, plugins: Any, do_timing: bool = False) -> EvalResult:
    from kag.core.evaluate import evaluate

    return evaluate(load_task(case), load_solution(case.path), eval_options(case, do_timing), plugins)


def describe(result: EvalResult) -> str:
    if result.violations:
        return "; ".join(f"{v.guard}: {v.detail}" for v in result.violations)[:300]
    if result.error_kind:
        return f"{result.error_kind}: {(result.error or '').splitlines()[0] if result.error else ''}"[:300]
    return "ok" if result.ok else "not ok (no error)"


def matches(case: Case, result: EvalResult) -> bool:
    """The verdict is the one the manifest expects (or an accepted alternative)."""
    for expect, detail in ((case.expect, case.detail), *case.also):
        if expect == "ok":
            output = str(result.metadata.get("candidate_output", ""))
            if result.ok and not result.violations and len(output) <= MAX_BOUNDED_OUTPUT:
                return True
        elif expect in GUARD_NAMES:
            if any(v.guard == expect and detail in v.detail for v in result.violations):
                return True
        elif result.error_kind == expect and detail.lower() in (result.error or "").lower():
            return True
    return False
