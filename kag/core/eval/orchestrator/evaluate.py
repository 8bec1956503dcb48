"""Trusted evaluation of one solution for one task: guards -> build -> judge -> reward.

This process (``kag score`` or a pool worker) orchestrates and never imports the solution. The
judge (``kag.core.eval.judge.judge``) is a fresh process with a minimal environment that times the baselines,
then drives a confined candidate process (``kag.core.trust.isolation``): checks on secret inputs
compared in the judge, calls timed on the judge's clock (``kag.core.eval.judge.judge_timing``). Both die when
the evaluation ends, so a crash, hang or CUDA error in one evaluation cannot affect the next. The
verdict is an ``EvalResult``; every failure has an ``error_kind``: build, guard, timeout, crash,
cuda_error, oom, mismatch or exception.

Guards (plugins of kind ``guard``, kag.core.eval.orchestrator.guarding) give early, readable feedback and enforce
policy (no PyTorch compute, one's own kernels): ``check_solution`` runs here before the build, and
``check_observations`` runs in the judge on what a profiler saw during every call of the
candidate. The verdict's integrity never rests on them: it holds with every guard switched off.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any, Callable

import attrs

from kag.core.plugins import Plugins
from kag.core.eval.orchestrator.plan import EvalPlan, resolve
from kag.core.eval.boundary import JudgeReport, JudgeSpec, MeasureSettings, measure_settings
from kag.core.eval.boundary import Timeouts  # noqa: F401 - part of this module's interface (EvalOptions.timeouts)
from kag.core.records import EvalResult, RewardValue, Solution, Task, Violation

# torch.compile modes the compile baseline accepts ("default" is torch's mode=None); listed once
# for EvalOptions.compile_mode, the baseline plugin and the CLI's --compile-mode choices.
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune")
ERROR_KINDS = ("build", "guard", "timeout", "crash", "cuda_error", "oom", "mismatch", "exception")
INIT_SEED = 42  # weights are not secret: the candidate receives them anyway
RUNTIME_GUARDS_WIRED = True  # guards judge what every call did (check_observations, in the judge)


@attrs.define
class EvalOptions(MeasureSettings):
    """What an evaluation is asked for: its plugins by name, and how it measures (``MeasureSettings``,
    the fields the judge's spec shares)."""

    backend: str = "cuda"
    tolerance: str | None = None  # None: the selected tolerance plugin (default cuda-agent)
    reward: str | None = None  # None: the selected reward plugin (default milestone)
    baselines: tuple[str, ...] = ("eager", "compile")
    compile_mode: str = "default"
    guards: tuple[str, ...] | None = None  # None: every selected guard plugin
    static_guards: bool = True  # False: no guard reads the sources (the verdict must hold without them)
    guard_options: dict[str, Any] = attrs.field(factory=dict)  # passed to every guard (GuardOptions)
    host_memory_gb: float | None = None  # private host memory a candidate may hold; None: half the RAM, at most 64 GiB

    def baseline_mode(self, name: str) -> str:
        """The mode ``name`` is timed in (torch.compile's ``compile_mode``; "default" for the rest): part of
        its cache key, so the judge's plan and a sandbox keeping a container's timing take it from here."""
        return self.compile_mode if name == "compile" else "default"


def backend_device(backend: str, plugins: Plugins | None = None) -> str:
    """The torch device a backend runs on ("cuda" or "cpu")."""
    if plugins is not None and backend in plugins.registry.get("backend", {}):
        factory = plugins.entry("backend", backend).factory
        device = getattr(factory, "device", None)
        if isinstance(device, str):
            return device
    return "cpu" if backend == "cpu" else "cuda"


def tolerance_name(options: EvalOptions, plugins: Plugins) -> str:
    name = options.tolerance or plugins.selected("tolerance")
    plugins.entry("tolerance", name)
    return name


def guard_options(options: EvalOptions, plugins: Plugins) -> dict[str, Any]:
    """The options every guard is built with: ``options.guard_options`` plus the tolerance policy
    of this evaluation (the precision guard flags reduced precision only under ``strict``)."""
    from kag.core.eval.orchestrator.guarding import TOLERANCE_POLICIES

    opts = dict(options.guard_options)
    tolerance = tolerance_name(options, plugins)
    if tolerance in TOLERANCE_POLICIES:
        opts["tolerance"] = tolerance
    return opts


def static_violations(task: Task, solution: Solution, plugins: Plugins, names: tuple[str, ...] | None,
                      options: dict[str, Any] | None = None, static: bool = True) -> tuple[list[Violation], list[str]]:
    """Run every selected guard's ``check_solution``; return violations and the names of the guards
    that also judge what the candidate's calls did (``check_observations``, run in the judge)."""
    from kag.core.eval.orchestrator.plan import guard_violations, make_guards

    guards = make_guards(plugins, names, options)
    found = guard_violations(guards, "check_solution", solution, task) if static else []
    return found, [name for name, guard in guards if callable(getattr(guard, "check_observations", None))]


def write_kernels(solution: Solution, solution_dir: Path) -> None:
    """Put kernels/** next to model_new.py: the provenance guard reads the ``__global__`` names there."""
    for name, text in solution.kernels.items():
        rel = Path(name[len("kernels/"):] if name.startswith("kernels/") else name)
        if not rel.parts or rel.is_absolute() or ".." in rel.parts:
            continue  # the build rejects it and says why
        dest = solution_dir / "kernels" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")


def extension_path(module_dir: str | None) -> str | None:
    """The built ``cuda_extension*.so`` (the provenance guard lists the functions it defines)."""
    import os

    if not module_dir:
        return None
    found = sorted(p for p in os.listdir(module_dir) if p.startswith("cuda_extension") and p.endswith((".so", ".pyd")))
    return os.path.join(module_dir, found[0]) if found else None


def needs_build(solution: Solution) -> bool:
    return bool(solution.kernels) or "cuda_extension" in solution.model_new


EVALUATOR_BUILD_FAULT = "the build failed for the evaluator's reasons (its disk or cache), not the solution's"


def build(solution: Solution, backend: Any, out_dir: Path, options: EvalOptions,
          lock_dir: Path | None = None) -> tuple[bool, str | None, str, list[str], float]:
    """(ok, module_dir, log, notes, seconds waited for the host's timings) from kag.core.eval.orchestrator.build
    with the backend plugin."""
    from kag.core.eval.orchestrator.build import build_solution

    cache_dir = Path(options.cache_dir) if options.cache_dir else None
    res = build_solution(solution, backend, out_dir, cache_dir=cache_dir, timeout_s=options.timeouts.build_s,
                         lock_dir=lock_dir)
    if res.evaluator_fault and "too busy" in (res.log or ""):  # starved by the host: once more, then its failure
        res = build_solution(solution, backend, out_dir, cache_dir=cache_dir, timeout_s=options.timeouts.build_s,
                             lock_dir=lock_dir)
    notes = []
    if res.cached:
        notes.append(f"build cache hits: {len(res.cached)}")
    if res.evaluator_fault:
        notes.append(EVALUATOR_BUILD_FAULT)
    if not res.slot_quiet:
        notes.append("built while another evaluation was timing (the wait for its end timed out)")
    return bool(res.ok), res.module_dir, res.log or "", notes, res.slot_wait_s


def _judge_spec(task: Task, options: EvalOptions, plan: EvalPlan, model_new_path: str,
                module_dir: str | None) -> JudgeSpec:
    runtime_guards = plan.runtime_guards()
    return JudgeSpec(
        task_code=task.code, task_path=task.path or f"<task {task.name}>", task_hash=task.code_hash,
        device=plan.device, backend=options.backend, model_new_path=model_new_path,
        module_dir=module_dir, tolerance=plan.tolerance, baselines=list(plan.baselines), init_seed=INIT_SEED,
        **measure_settings(options),
        runtime_guards=runtime_guards, guard_options=dict(plan.guard_options),
        plugin_selection=plan.plugin_selection, plugin_builtins=list(plan.guard_builtins),
        extension_path=extension_path(module_dir),
        host_memory_bytes=int(options.host_memory_gb * 2**30) if options.host_memory_gb else None,
    )


def guard_builtins(plugins: Plugins, names: list[str]) -> list[str]:
    """Modules of the runtime guards that are built in to ``plugins`` but not to DEFAULT_PLUGINS
    (a registry built with extra built-ins, as tests do), so the candidate can rebuild them."""
    from kag.core.plugins import BUILTIN, DEFAULT_PLUGINS

    extra = []
    for name in names:
        entry = plugins.entry("guard", name)
        if plugins.origins.get(entry.plugin) == BUILTIN and entry.plugin not in DEFAULT_PLUGINS:
            extra.append(entry.plugin)
    return sorted(set(extra))


def _merge(result: EvalResult, report: JudgeReport) -> None:
    result.correct = report.correct
    if report.error:
        result.error, result.error_kind = report.error, report.error_kind or "exception"
    result.violations += [Violation(guard=str(v.get("guard")), detail=str(v.get("detail")))
                          for v in report.violations]
    if result.violations and not result.error:
        result.error_kind = "guard"
        result.error = "; ".join(f"{v.guard}: {v.detail}" for v in result.violations)
    result.times_ms.update(report.times_ms)
    result.timing.update(report.timing)
    result.device = report.device
    result.peak_memory_mb = report.peak_memory_mb
    result.durations_s.update(report.durations_s)
    for key in JudgeReport.METADATA:
        if getattr(report, key):
            result.metadata[key] = getattr(report, key)


def speedups(result: EvalResult) -> None:
    t = result.times_ms.get("candidate")
    if t and t > 0:
        if result.times_ms.get("eager"):
            result.speedup_vs_eager = result.times_ms["eager"] / t
        if result.times_ms.get("compile"):
            result.speedup_vs_compile = result.times_ms["compile"] / t


def evaluate(task: Task, solution: Solution, options: EvalOptions | None = None,
             plugins: Plugins | None = None, pool: Any = None,
             progress: Callable[[str], None] | None = None) -> EvalResult:
    """The verdict on ``solution`` for ``task``; never raises for anything the solution does.
    ``progress`` hears each phase (building, the judge's phases) as it starts."""
    say = progress or (lambda _phase: None)
    import tempfile

    from kag.core.eval.orchestrator.gpu_pool import default_pool
    from kag.core.trust.isolation import evals_root
    from kag.core.eval.orchestrator.judge_process import JudgeProcess, take_judge, warm_judge_waiting
    from kag.core import timeline
    from kag.core.trace import mark

    options = options or EvalOptions()
    plugins = plugins or Plugins()
    start = time.perf_counter()
    plan = resolve(options, plugins)  # every plugin choice, once: nothing below asks the registry
    device = plan.device
    result = EvalResult(task=task.name, backend=options.backend)
    if solution.ignored_files:
        result.metadata["ignored_files"] = list(solution.ignored_files)
    solution, failure = single_file_solution(solution, result)
    if failure:
        result.error_kind, result.error = "build", failure
        return finish_verdict(result, plugins, options, start, reward=plan.reward)
    violations = plan.static_violations(task, solution) if options.static_guards else []
    if violations:
        result.violations = violations
        result.error_kind = "guard"
        result.error = "; ".join(f"{v.guard}: {v.detail}" for v in violations)
        return finish_verdict(result, plugins, options, start, reward=plan.reward)
    # No warm judge waiting: start one now, so its torch import overlaps the build. Otherwise a
    # warm one is taken after the build, and a failed build costs none.
    judge = None if warm_judge_waiting() else JudgeProcess()
    mark("orchestrator", "judge started" if judge else "a warm judge is waiting")
    try:
        with tempfile.TemporaryDirectory(prefix="kag-eval-", dir=evals_root()) as tmp:
            tmpdir = Path(tmp)
            model_new_path = tmpdir / "solution" / "model_new.py"
            model_new_path.parent.mkdir()
            model_new_path.write_text(solution.model_new, encoding="utf-8")
            write_kernels(solution, model_new_path.parent)
            module_dir = None
            if needs_build(solution):
                say("building")
                t0 = time.perf_counter()
                # the compilers hold this CPU's timing slot (kag.core.eval.orchestrator.build): not beside a timing
                with timeline.span("build", task=task.name):
                    ok, module_dir, log, notes, wait_s = build(solution, plan.backend(), tmpdir / "build", options,
                                                               getattr(pool or default_pool(), "lock_dir", None))
                result.durations_s["build_wait"] = wait_s
                result.durations_s["build"] = round(time.perf_counter() - t0, 3)
                result.build_log = log
                if notes:
                    result.metadata.setdefault("notes", []).extend(notes)
                if not ok:
                    result.error_kind, result.error = "build", f"build failed:\n{log}".strip()
                    if EVALUATOR_BUILD_FAULT in notes:  # its disk, not the solution: an evaluator error
                        result.metadata["judge_error"] = True
                    return finish_verdict(result, plugins, options, start, reward=plan.reward)
            result.compiled = True
            built = plan.build_violations(extension_path(module_dir)) if options.static_guards else []
            if built:
                result.violations = built
                result.error_kind = "guard"
                result.error = "; ".join(f"{v.guard}: {v.detail}" for v in built)
                return finish_verdict(result, plugins, options, start, reward=plan.reward)
            spec = _judge_spec(task, options, plan, str(model_new_path), module_dir)
            judge = judge or take_judge()
            lease = contextlib.ExitStack()
            with timeline.span("wait: device slot", task=task.name):
                slot = lease.enter_context((pool or default_pool()).acquire("cpu" if device == "cpu" else "cuda"))
            lock_dir = getattr(pool or default_pool(), "lock_dir", None)
            spec = attrs.evolve(spec, timing_slot=slot.id, lock_dir=str(lock_dir) if lock_dir else None,
                                trace_lane=timeline.lane() if timeline.enabled() else "")
            try:
                t0 = time.perf_counter()
                mark("orchestrator", f"build done, {'GPU' if device.startswith('cuda') else 'CPU slot'} lent, spec sent")
                say("starting the judge (reference model and inputs)")
                with timeline.span("judge", task=task.name):
                    report = judge.run(spec, slot.visible, on_phase=say)
                mark("orchestrator", "report received")
                result.durations_s["judge_wall"] = round(time.perf_counter() - t0, 3)
            except BaseException:
                judge.close()
                lease.close()
                raise
            # the verdict is in: the judge and its candidate are ended (their GPU memory freed)
            # before the device goes back to the pool, but the caller does not wait for it
            _release_later(judge, lease)
            judge = None
    finally:
        if judge is not None:
            judge.close()
    _merge(result, report)
    return finish_verdict(result, plugins, options, start, reward=plan.reward)


def single_file_solution(solution: Solution, result: EvalResult) -> tuple[Solution, str | None]:
    """A KernelBench single-file solution (load_inline, no kernels/) as the kag solution it
    stands for (kag.core.eval.orchestrator.single_file), noted in ``result.metadata``; others unchanged.
    Returns (solution, None) or (the given solution, why it cannot be read)."""
    from kag.core.eval.orchestrator.single_file import CONVERTED_FROM, SingleFileError, convert, is_single_file

    if not is_single_file(solution):
        return solution, None
    try:
        converted = convert(solution)
    except SingleFileError as exc:
        return solution, f"model_new.py: {exc}"
    result.metadata["converted_from"] = CONVERTED_FROM
    result.metadata["converted_files"] = sorted(converted.kernels)
    return converted, None


def _release_later(judge: Any, lease: contextlib.ExitStack) -> None:
    """Close ``judge``, then give its device back, on a thread (not a daemon: an exiting CLI
    still waits for it, so no judge outlives the process that started it)."""
    from kag.core import timeline
    from kag.core.trace import mark

    lane = timeline.lane()

    def close() -> None:
        try:
            with timeline.in_lane(lane), timeline.span("closing the judge"):
                judge.close()
            mark("orchestrator", "judge closed, device given back")
        finally:
            lease.close()
            _RELEASING.discard(threading.current_thread())

    thread = threading.Thread(target=close, name="kag-judge-close")
    _RELEASING.add(thread)
    thread.start()


_RELEASING: set[threading.Thread] = set()


def wait_released(timeout_s: float = 30.0) -> None:
    """Wait until every judge an evaluation started has ended and given its device back (what
    a check that nothing outlived the evaluation must wait for)."""
    deadline = time.monotonic() + timeout_s
    for thread in list(_RELEASING):  # each removes itself when done
        thread.join(max(0.0, deadline - time.monotonic()))


def finish_verdict(result: EvalResult, plugins: Plugins, options: EvalOptions, start: float,
                   reward: Any = None) -> EvalResult:
    """Every verdict's ending, wherever it was reached (here or in a sandbox's evaluator): no verdict is a
    failure, the speed-ups, the reward (``reward``, or the one ``options`` and ``plugins`` choose), the
    total time."""
    if not result.error and options.do_correctness and not result.correct:
        result.error_kind, result.error = "exception", "the evaluation ended without a verdict"
    speedups(result)
    if not options.do_correctness:  # kag profile: nothing was checked, so nothing passed or failed
        result.metadata["checks"] = "skipped"
    if options.do_correctness:
        if reward is None:
            reward = plugins.create("reward", options.reward) if options.reward else plugins.create("reward")
        result.reward = RewardValue(name=getattr(reward, "name", options.reward or "reward"),
                                    value=float(reward(result)))
    result.durations_s["total"] = round(time.perf_counter() - start, 3)
    return result
