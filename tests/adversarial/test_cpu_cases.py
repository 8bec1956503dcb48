"""End to end: every CPU case of the corpus through ``kag.core.eval.orchestrator.evaluate.evaluate`` (real build, real
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
         "zero_inputs", "example_relu", "host_memory_exhaustion"}  # seed_prediction (42 s): the slow lane


# A family's further routes run in the slow lane (`pytest -m slow`, and the whole corpus in
# bench/scripts/adversarial.py): CI keeps at least two routes of each family, the most unlike (Python and
# C++ or ctypes), and one of each mechanism of "ATen's kernels unseen" (a direct ATen entry point, the
# recorder switched off, a harness patch, threads that dilute the samples). CI's 30 minutes: the cases
# cost 3-19 s each on 2 cores and the corpus grew to 48 families' cases (670 s of 1955 s).
FURTHER_ROUTES = {"aten_namespace_alias", "aten_redispatch", "aten_dlsym", "dilute_threads_python",
                  "dilute_openmp_cpp", "memfd_remap_cpp", "hop_threads_cpp", "spoof_range_cpp",
                  "spot_by_call_count", "judge_memory_cpp", "exec_environ_cpp", "skip_cpp_counter",
                  "timer_harness_object", "tiny_sparse_cpp", "escape_cpp_fork", "write_outside_cpp", "late_aten_cpp",
                  "skip_after_pauses_cpp", "syscall_table"}


def _params(items: list[Case]) -> list:
    quick = lambda c: (c.static or c.family or c.name in QUICK) and c.name not in FURTHER_ROUTES  # noqa: E731
    return [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow or not quick(c) else []) for c in items]


@pytest.mark.parametrize("case", _params(cases("cpu")))
def test_cpu_case_verdict(case: Case, tmp_path_factory) -> None:
    """The families of attacks run with every static guard off: the runtime defences alone."""
    static = not case.family
    result = run_case(case, guard_plugins(), do_timing=case.name in ("first_calls_only", "stdout_flood"),
                      static_guards=static)
    assert matches(case, result, static_guards=static), \
        f"{case.id}: expected {case.expect} {case.detail!r}, got {describe(result, case)}"


@pytest.mark.parametrize("name", ["dilute_threads_cpp", "example_relu"])
def test_an_untimed_evaluation_samples_where_the_work_runs(name: str) -> None:
    """Provenance is no privilege of timed evaluations: untimed, a fallback's calls went unsampled and it
    passed as correct (reward 1 where -1 is due). Sampled windows run all the same; an honest kernel passes."""
    from kag.core.eval.orchestrator.evaluate import evaluate, wait_released
    from tests.adversarial.cases import load_task
    from tests.adversarial.runner import eval_options

    case = next(c for c in cases("cpu") if c.name == name)
    result = evaluate(load_task(case), case.solution(), eval_options(case, False, static_guards=False),
                      guard_plugins())
    wait_released()
    samples = (result.metadata.get("observed") or {}).get("cpu_samples") or {}
    assert samples.get("windows", 0) >= 32 and not result.times_ms, (samples, result.times_ms)
    caught = [v for v in result.violations if "provenance" in str(v)]
    assert bool(caught) == (name != "example_relu"), describe(result, case)
    assert result.correct


@pytest.mark.parametrize("name", ["pad_null_windows_python", "pad_null_windows_hotgap_python"])
def test_a_padded_null_base_buys_no_speed(name: str) -> None:
    """Where a window holds one call, a call's time is its window less the null windows' median, and a
    null window is an op the solution can tell: one that spins in every null window for 90% of a call
    (twice an honest ReLU's work) read 6.90x eager, reward 2. The baseline runner's null windows bound
    the base: timed with every static guard off, it gets only the speed it has (three ReLUs' work now:
    what the bound leaves it is its margin and the runner's noise, and with two ReLUs CI read 1.0x and
    1.33x once each in about fifteen runs, the VM 0.51-0.94x in 20). The hotgap twin stretches the gap
    through the harness's poison so the runner is timed cold: the runner's gap is sized from parts the
    candidate cannot stretch (before: 0.33 s gaps, and one run in five read 1.065x, reward 2)."""
    import json

    case = next(c for c in cases("cpu") if c.name == name)
    result = run_case(case, guard_plugins(), do_timing=True, static_guards=False)
    assert result.ok and not result.violations, describe(result, case)
    cal = result.metadata.get("calibration") or {}
    seen = {"eager": {k: (cal.get("baselines") or {}).get("eager", {}).get(k) for k in ("window_ms", "null_window_ms")},
            "candidate": {k: cal.get(k) for k in ("window_ms", "null_window_ms", "runner_null_window_ms", "pause_ms",
                                                  "runner_pause_ms", "null_base_cap_ms")},
            "load": result.metadata.get("timing_load"), "notes": result.metadata.get("notes")}
    assert (result.speedup_vs_eager or 0.0) < 1.0 and result.reward.value <= 1, \
        f"{describe(result, case)}; {json.dumps(seen, default=str)}"
    if name.endswith("hotgap_python"):  # its own gaps stretched past 0.15 s; the runner's not
        assert cal["pause_ms"] > 150 and cal["runner_pause_ms"] < cal["pause_ms"] / 4, json.dumps(seen, default=str)
