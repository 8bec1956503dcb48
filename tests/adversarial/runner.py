"""Run one corpus case through the real evaluator and judge the verdict (CI test and device bench)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from kag.core.records import EvalResult
from tests.adversarial.cases import GUARD_NAMES, Case, load_task

MAX_BOUNDED_OUTPUT = 1 << 20  # what a flood of stdout may leave in the result


def evaluator_ready() -> str | None:
    """None when kag.core.eval.orchestrator.evaluate exists and runs the guards of kag.core.eval.orchestrator.guarding, else why not."""
    try:
        import kag.core.eval.orchestrator.evaluate as evaluate
    except ImportError as exc:
        return f"kag.core.eval.orchestrator.evaluate is not importable yet ({exc})"
    if not getattr(evaluate, "RUNTIME_GUARDS_WIRED", False):
        return "kag.core.eval.orchestrator.evaluate does not run the runtime guards yet (RUNTIME_GUARDS_WIRED is not set)"
    return None


def eval_options(case: Case, do_timing: bool, num_timed: int = 20, static_guards: bool = True) -> Any:
    from kag.core.eval.orchestrator.evaluate import EvalOptions, Timeouts

    fields = {f.name for f in attrs.fields(EvalOptions)}
    kw: dict[str, Any] = dict(backend=case.backend, tolerance=case.tolerance, num_checks=5, do_timing=do_timing,
                              guards=tuple(n for n in GUARD_NAMES if n not in case.guards_off),
                              timeouts=attrs.evolve(Timeouts(), **case.timeouts), static_guards=static_guards)
    if do_timing:  # eager alone: no verdict here needs torch.compile's time (4 s an evaluation on the 2-core VM)
        kw.update(num_timed=num_timed, warmup=3, baselines=("eager",))
    if "guard_options" in fields:
        kw["guard_options"] = dict(case.guard_options)
    return EvalOptions(**{k: v for k, v in kw.items() if k in fields})


def run_case(case: Case, plugins: Any, do_timing: bool = False, static_guards: bool = True) -> EvalResult:
    """The verdict on ``case`` (timed when the case needs it or ``do_timing``); afterwards the
    processes and files the attack tried to leave behind are looked for and noted in the result."""
    from kag.core.eval.orchestrator.evaluate import evaluate, wait_released

    if case.no_file:
        Path(case.no_file).unlink(missing_ok=True)
    result = evaluate(load_task(case), case.solution(),
                      eval_options(case, do_timing or case.timed, static_guards=static_guards), plugins)
    wait_released()  # the evaluation has ended once its judge has
    if case.survivor:
        result.metadata["survivors"] = processes_named(case.survivor)
    if case.no_file and Path(case.no_file).exists():
        result.metadata["file_left"] = case.no_file
    return result


def processes_named(name: str) -> list[int]:
    """Live processes whose name (/proc/<pid>/comm) is ``name``; killed once counted."""
    import os
    import signal

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as fh:
                    if fh.read().strip() == name[:15]:
                        found.append(int(entry))
                        os.kill(int(entry), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue
    return found


def describe(result: EvalResult, case: Case | None = None) -> str:
    left = side_effects(case, result) if case is not None else None
    if left:
        return f"LEFT BEHIND: {left}"[:300]
    if result.violations:
        return "; ".join(f"{v.guard}: {v.detail}" for v in result.violations)[:300]
    if result.error_kind:
        return f"{result.error_kind}: {(result.error or '').splitlines()[0] if result.error else ''}"[:300]
    if result.ok and result.speedup_vs_eager is not None:
        return f"ok ({result.speedup_vs_eager:.2f}x eager, reward {result.reward.value if result.reward else '?'})"
    return "ok" if result.ok else "not ok (no error)"


def side_effects(case: Case, result: EvalResult) -> str | None:
    """What the attack left that it must not have (survivors, files, its own boasts), or None."""
    output = str(result.metadata.get("candidate_output", ""))
    if result.metadata.get("survivors"):
        return f"processes outlived the evaluation: {result.metadata['survivors']}"
    if result.metadata.get("file_left"):
        return f"wrote {result.metadata['file_left']}"
    if case.forbid_output and case.forbid_output in output and result.ok:  # it got away with it
        return f"the candidate printed {case.forbid_output!r}: {output[-300:]}"
    if case.require_output and result.compiled and result.error_kind not in ("build",) \
            and case.require_output not in output:
        return f"the candidate never printed {case.require_output!r} (the attack did not run?): {output[-300:]}"
    return None


def matches(case: Case, result: EvalResult, static_guards: bool = True) -> bool:
    """The verdict is the one the manifest expects (or an accepted alternative), and the attack left
    nothing behind. Without the static guards, ``case.no_static_outcomes`` are accepted instead."""
    if side_effects(case, result) is not None:
        return False
    if static_guards and case.family and result.reward and result.reward.value == -1 and result.violations \
            and all(v.detail.startswith(("model_new.py:", "kernels/")) for v in result.violations):
        return True  # caught in its sources before it ran; the run without static guards shows the runtime defence
    if not static_guards:
        outcomes = case.no_static_outcomes
        if "fail" in outcomes and result.reward is not None and result.reward.value == -1:
            return True
        if "ok" in outcomes and result.ok and not result.violations:
            return True
        if "same" not in outcomes:
            return False
    for expect, detail in ((case.expect, case.detail), *case.also):
        if expect == "ok":
            output = str(result.metadata.get("candidate_output", ""))
            if result.ok and not result.violations and len(output) <= MAX_BOUNDED_OUTPUT:
                return True
        elif expect == "slow":  # its real speed: several times the work, so not faster than eager
            if result.ok and not result.violations and (result.speedup_vs_eager or 0.0) < 1.0 \
                    and result.reward is not None and result.reward.value <= 1:
                return True
        elif expect in GUARD_NAMES + ("evaluator",):
            if any(v.guard == expect and detail in v.detail for v in result.violations):
                return True
        elif result.error_kind == expect and detail.lower() in (result.error or "").lower():
            return True
    return False
