"""The judge's side of every call of its candidate: the hand-over calibration, the checks, the
timed windows with their secret re-checks, and what the guards make of the observed calls.

Trusted side. ``CandidateCalls`` is an object its ``kag.core.eval.judge.judge.Judge`` holds
(``judge.calls``), given the judge's reference, clock and report and asking it for seeds and inputs; the candidate is driven through ``kag.core.eval.judge.candidate_process.CandidateProcess``,
the windows by ``kag.core.eval.judge.judge_windows`` and their arithmetic by ``kag.core.eval.judge.judge_timing``;
the secret re-checks are ``kag.core.eval.judge.judge_rechecks``' and the windows' sizes
``kag.core.eval.judge.judge_sizing``'s (parts of ``CandidateCalls``).

The order of a candidate's life: its profiler starts (kernel records on for every call from here to
the last), output hand-overs are calibrated, model_new.py is imported; then one window of
``num_checks`` calls on fresh secret inputs whose outputs are all compared (a wrong solution fails
here, before any timing); then warm-up windows and, in a secret order, long, short and sampled
windows. After every window each of its calls is compared with a secret probability
(independent per call, so no count of checks is ever used up), and the gap before the next window
is padded to one length. A compared output is copied out while the candidate is stopped and
compared after the last window; one too large to keep a dozen of (on a GPU) is read at secret
positions only (kag.core.eval.judge.output_samples), so the padded gap costs a gather, not a reference run.
"""

from __future__ import annotations

import io
import math
import os
import secrets
import statistics
import time
from typing import Any

from kag.core.eval.judge.candidate_process import CandidateProcess
from kag.core.eval.judge.judge_rechecks import SecretRechecks
from kag.core.eval.judge.judge_sizing import WindowSizing, tree_bytes
from kag.core.eval.boundary import JudgeReport, JudgeSpec
from kag.core.records import to_dict
from kag.core.trace import mark


def input_description(inputs: list[Any], device: str) -> dict[str, Any]:
    """How the candidate allocates an input set: shapes, strides and dtypes of the tensors,
    values of the rest."""
    import torch

    items = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            items.append({"shape": list(x.shape), "stride": list(x.stride()), "dtype": str(x.dtype).replace("torch.", ""),
                          "device": device})
        else:
            items.append({"value": x})
    return {"seq": "list", "items": items}


def median_ms(xs: list[float], scale: float = 1e3, digits: int = 4) -> float | None:
    """The median of ``xs`` (seconds, unless ``scale`` says otherwise) for the report, None if empty."""
    from kag.core.eval.judge.judge_timing import median

    return round(median(xs) * scale, digits) if xs else None


PATH_KEYS = ("forward", "harness", "between", "calls")


def path_account(reported: Any) -> dict[str, float]:
    """A child's account of where a call's time went (kag.core.eval.candidate.candidate ``path_report``), kept to
    its known numeric fields: an untrusted report, shown in the calibration and never scored."""
    if not isinstance(reported, dict):
        return {}
    return {k: float(reported[k]) for k in PATH_KEYS
            if isinstance(reported.get(k), (int, float)) and math.isfinite(reported[k])}


def window_summary(timing: Any, plan: Any) -> dict[str, Any]:
    """What the report says of one side's windows."""
    return {"calls_per_window": timing.calls, "calls_per_short_window": timing.short_calls,
            "windows": {k: plan.order.count(k) for k in sorted(set(plan.order))},
            "window_ms": median_ms(timing.timed_s), "short_window_ms": median_ms(timing.short_s),
            "null_window_ms": median_ms(timing.null_s), "window_end_ms": median_ms(timing.end_s),
            "intercept_ms": round(timing.intercept_s() * 1e3, 4) if timing.short_s and timing.timed_s else None,
            "drained_intercept_ms": (round(timing.drained_intercept_s() * 1e3, 4)
                                     if timing.short_s and timing.timed_s else None)}


NOT_IN_MEMORY = object()  # outputs_as_answered: a CPU output not where the call's answer put it
DEFERRED_BYTES = 2 << 30  # re-checked outputs kept for comparison after the last window, at most (else compared at once)
RUNNER_NULL_WINDOWS = 12  # the runner's null windows that bound a candidate's null base (each after the
# candidate's gap, ~50 ms on the VM: 34 of them added 1.8 s to a CPU evaluation, ~5 min to CI's suite)
TIMING_ATTEMPTS = 2  # a timing that looks like skipped work is taken again once: a claim needs both


class CandidateCalls(SecretRechecks, WindowSizing):
    """What the judge does with its candidate, window by window: an object its ``Judge`` holds
    (``judge.calls``). The judge's fixed state (spec, report, clock, device, the reference and its
    tolerance) is taken once here; seeds, inputs, the comparison, the GPU probe, the runner's null
    windows, the timing slot and the CPU provenance are asked of ``judge``."""

    def __init__(self, judge: Any):
        self.judge = judge
        self.spec: JudgeSpec = judge.spec
        self.report: JudgeReport = judge.report
        self.clock, self.device, self.cuda, self.plugins = judge.clock, judge.device, judge.cuda, judge.plugins
        self.model, self.local, self.reference_output = judge.model, judge.local, judge.reference_output
        self.tolerance, self.ref64 = judge.tolerance, judge.ref64
        self.sets: list[list[Any]] = []  # the candidate's input sets, shared with this process
        self.check_per_call_s = 0.0  # a call's time in the checks' windows (cold: an overestimate)
        self.candidate: Any = None
        self.reader: Any = None  # GPU: the candidate's allocations, mapped here (kag.core.eval.judge.gpu_outputs)
        self.where: list[Any] = []  # where the last window's outputs are, from its end's answer
        self.capture_s = 0.0  # the slowest capture of a check's output (a read or hand-over)
        self.verify_s = 0.0  # ... and comparison
        self.recheck_p = 0.0
        self.rechecked = 0
        self.skipped_why: str | None = None  # the last timing looked like work skipped on some calls
        self.calls_seen = 0  # the candidate's calls so far, every window's
        self.compared_at: list[int] = []  # which of them had their outputs compared
        self.defer_checks = False
        self._window_budget: int | None = None  # every window's memory budget (judge_calls.window_budget)
        self.sample_plan: Any = None  # secret positions where large GPU outputs are re-checked (output_samples)
        self.pending: list[tuple[str, int, Any, int | None]] = []  # captured outputs compared after the last window

    def start_candidate(self, cand: CandidateProcess) -> CandidateProcess:
        """Start the profiler, calibrate output hand-overs while no solution code exists in the
        candidate, then have it import the solution, load the reference weights and allocate the
        input sets of the checks, shared with us."""
        import torch

        spec = self.spec
        load_s = spec.timeouts.load_s
        start = time.perf_counter()
        cand.probe = self.judge.gpu_probe()  # made while the candidate is stopped and its device idle
        cand.spin = self.cuda
        # the profiler runs from here to the last window: every call, checked or timed, under the
        # same session, kernel records included (kag.core.eval.candidate.observe)
        cand.exchange(("observe", {"kernels": True}), load_s, "starting the observer", expect="observing")
        if self.judge.probe is not None:
            self.report.calibration["idle_probe_us"] = round(self.judge.probe.idle_s * 1e6, 2)
        if self.cuda:
            from kag.core.eval.judge.gpu_outputs import SegmentReader

            self.reader = SegmentReader(self.device)
        self.candidate = cand
        self.sets = []
        self.add_sets(cand, self.sets_that_fit(spec.num_checks), load_s)
        cspec = to_dict(spec.candidate())  # all the candidate is told of the task
        cand.exchange(("spec", cspec), load_s, "importing model_new.py and building ModelNew", expect="ready")
        buf = io.BytesIO()
        torch.save({k: v.detach().to("cpu") for k, v in self.model.state_dict().items()}, buf)
        loaded, _ = cand.exchange(("state", buf.getvalue()), load_s, "loading the reference weights into ModelNew",
                                  expect="loaded")
        del buf
        if loaded[1].get("unexpected") or loaded[1].get("missing"):
            self.report.notes.append(f"state_dict keys not matched: {loaded[1]}")
        self.report.durations_s["load"] = round(time.perf_counter() - start, 3)
        return cand

    def add_sets(self, proc: CandidateProcess, total: int, timeout_s: float, sets: list[list[Any]] | None = None) -> None:
        """Have ``proc`` allocate input sets (shared with us) until it holds ``total``."""
        sets = self.sets if sets is None else sets
        if total <= len(sets):
            return
        reply, _ = proc.exchange(("buffers", {"count": total - len(sets),
                                              "descr": input_description(self.local, self.device)}),
                                 timeout_s, "allocating the input sets", expect="buffers")
        sets.extend(list(s) for s in reply[1])

    # -- outputs --------------------------------------------------------------------------------
    def window_ended(self, cand: CandidateProcess) -> None:
        """Read where the last window's outputs are from its end's answer (and, on a GPU, map the
        allocations the candidate names for the first time: they must be mapped whether or not an
        output of this window is read)."""
        from kag.core.eval.boundary import EXTENT, COUNT

        tail = cand.tail
        if self.cuda:
            from kag.core.eval.judge.gpu_outputs import parse

            try:
                self.where, fresh = parse(tail)
                self.reader.add(fresh)
                self.where_error = None
            except Exception as exc:  # noqa: BLE001 - an answer the judge cannot read: nothing can be read from it
                self.where, self.where_error = [], f"{type(exc).__name__}: {exc}"
        else:
            n = COUNT.unpack_from(tail, 0)[0] if len(tail) >= COUNT.size else 0
            self.where = [EXTENT.unpack_from(tail, COUNT.size + k * EXTENT.size) for k in range(n)
                          if COUNT.size + (k + 1) * EXTENT.size <= len(tail)]

    # -- the checks -----------------------------------------------------------------------------
    def check(self, cand: CandidateProcess) -> bool:
        """The correctness checks: ``num_checks`` calls on fresh secret inputs in windows (the same
        path as every other window; as many calls a window as input sets fit), every output
        compared; ``check_s`` bounds each window."""
        n = max(1, self.spec.num_checks)
        per = max(1, len(self.sets))
        limit = self.spec.timeouts.check_s
        start = time.perf_counter()
        captures: list[float] = []
        verifies: list[float] = []
        windows_s: list[float] = []
        try:
            seeds = [secrets.randbits(62) if self.spec.seed is None else self.judge.derived_seed("check", k)
                     for k in range(n)]
            for first in range(0, n, per):
                chunk = seeds[first:first + per]
                for j, seed in enumerate(chunk):
                    self.judge.fill(self.sets[j], self.judge.make_inputs(seed))
                self.judge.settle()
                mark("judge", "checks: inputs ready")
                phase = f"the {n} checks" if n > 1 else "the check"
                windows_s.append(cand.window(len(chunk), limit, phase) / len(chunk))
                self.window_ended(cand)
                self.compared_at += range(self.calls_seen, self.calls_seen + len(chunk))
                self.calls_seen += len(chunk)
                for j, seed in enumerate(chunk):
                    t0 = time.perf_counter()
                    out = self.capture(j)
                    t1 = time.perf_counter()
                    mismatch = self.verify(out, seed, f"check {first + j + 1}")
                    captures.append(t1 - t0)  # what a re-check costs a gap
                    verifies.append(time.perf_counter() - t1)  # ... if it were compared there
                    mark("judge", f"check {first + j + 1}: compared")
                    if mismatch is not None:
                        return self.judge.fail("mismatch", f"check {first + j + 1} of {n}: {mismatch}")
            self.check_per_call_s = min(windows_s)
            # the gap after a window is padded to hold a re-check's capture: typical, with room for noise
            self.capture_s = 2.0 * statistics.median(captures)
            self.verify_s = 2.0 * statistics.median(verifies)
        finally:
            self.report.durations_s["checks"] = round(time.perf_counter() - start, 3)
            self.judge.free()
        self.report.correct = True
        return True

    # -- timing ---------------------------------------------------------------------------------
    def time_candidate(self, cand: CandidateProcess) -> bool:
        """Warm-up, then long, short and sampled windows in a secret order on the judge's clock,
        inside the device's timing slot; outputs compared in secret after each."""
        import attrs

        from kag.core.eval.orchestrator.timing_lock import LoadMeter

        for attempt in range(TIMING_ATTEMPTS):
            self.skipped_why = None
            meter = LoadMeter((cand.pid,))  # the candidate cannot fork (seccomp): others' CPU is not its own
            with self.judge.timing_slot().exclusive() as slot:  # machine-wide: no other timing, no heavy work
                with meter.measuring():
                    timed = self.timed_windows(cand)
                cond = attrs.evolve(slot)
                meter.fill(cond)
            self.report.timing_load["candidate"] = attrs.asdict(cond)
            if not timed or self.skipped_why is None:
                return timed
            load = cond.loaded()
            if attempt + 1 < TIMING_ATTEMPTS:  # chance, or load, must not decide it: fresh windows, new secrets
                self.report.notes.append(f"timing: {self.skipped_why}{f' ({load})' if load else ''}: timed again")
                continue
            if load is None:  # twice, on a quiet machine: windows far under the checked ones skipped the work
                self.report.violation("evaluator", f"timing: {self.skipped_why} (in two timings)")
                return timed
        # twice under load: the checked windows may all have been slowed, which no rule can tell apart
        self.report.fail("exception", f"this machine was too busy to time the solution ({load}); the "
                                      f"evaluator's failure, not the solution's: retry on a quieter machine",
                         judge_error=True)
        return False

    def timed_windows(self, cand: CandidateProcess, resized: int = 0, counter: list[int] | None = None) -> bool:
        """Size the windows (``sized_calls``), then time them; ``resized``: time windows of that many
        calls, sized already (``too_short``), and sample none (the first timing did)."""
        from kag.core.eval.judge.judge_timing import (RECHECK_EXPECTED, SAMPLED_WINDOWS, Plan, WindowTiming,
                                                recheck_probability, timed_windows, warmup_windows)
        from kag.core.eval.judge.judge_windows import run_windows

        spec = self.spec
        deadline = time.monotonic() + spec.timeouts.timing_s
        start = time.perf_counter()
        counter = counter if counter is not None else [0]
        if resized:
            calls = resized
        else:
            first = self.window_calls(cand, self.sets, self.check_per_call_s, spec.timeouts.load_s)

            def sizing(plan: Plan) -> WindowTiming:  # windows sized by the (cold) checks, then re-sized warm
                self.recheck_p = recheck_probability(plan.calls * (spec.num_timed + spec.warmup),
                                                     spec.do_correctness)
                return run_windows(self.judge, cand, self.sets, plan, purpose="timed", timeout_s=spec.timeouts.timing_s,
                                   phase="warming up", after=self.rechecker(cand), deadline=deadline, counter=counter)

            calls, per_call_s, warm = self.sized_calls(cand, self.sets, first, sizing)
            if warm.failed:
                return False
            if self.judge.provenance is not None:
                self.judge.provenance.expected_s = per_call_s
        plan = Plan.make(calls, timed=timed_windows(calls, spec.num_timed, self.cuda),
                         warmup=warmup_windows(calls, spec.warmup, self.cuda),
                         sampled=SAMPLED_WINDOWS["cuda" if self.cuda else "cpu"] if self.sampling() and not resized
                         else 0)
        self.recheck_p = recheck_probability(plan.total_calls(), spec.do_correctness)
        expected = 2 * RECHECK_EXPECTED[1] * tree_bytes(self.reference_output)
        self.defer_checks = expected <= DEFERRED_BYTES and (not self.cuda or expected <= 0.25 * self.budget_bytes())
        self.sample_plan = None
        if self.cuda and not self.defer_checks:  # too large to keep whole: a secret sample of each, compared later
            from kag.core.eval.judge.output_samples import SamplePlan

            self.sample_plan = SamplePlan(self.reference_output, self.device)
            self.defer_checks = True
            self.report.calibration["rechecked_share"] = round(self.sample_plan.share, 6)
        self.reserve_kept(self.recheck_p * plan.total_calls())
        pause = self.pause_s(cand, calls)
        timing: WindowTiming = run_windows(self.judge, cand, self.sets, plan, purpose="timed", timeout_s=spec.timeouts.timing_s,
                                           phase="timing", after=self.rechecker(cand), pause_s=pause,
                                           sampler=self.sampler, deadline=deadline, counter=counter)
        if not resized and not timing.failed and not self.more_samples(cand, calls, deadline, counter,
                                                                       spec.timeouts.timing_s):
            return False
        self.report.rechecked_calls = self.rechecked
        self.report.calibration["compared_calls"] = list(self.compared_at)  # after the fact: which calls (0-based)
        self.report.durations_s["timing"] = round(time.perf_counter() - start, 3)
        if timing.failed or not self.verify_pending(timing):
            return False
        if timing.null_s and not timing.short_s:  # a base the candidate can tell and pad: capped by the runner's
            self.cap_null_base(timing)
        elif timing.short_s and self.cuda:  # a short base padded where only a short window's end can be
            self.cap_intercept(timing)
            more = 0 if resized else self.too_short(cand, timing)
            if more:
                return self.timed_windows(cand, resized=more, counter=counter)
        self.record_timing(timing, plan, pause)
        mark("judge", "timed windows done")
        return True

    def cap_null_base(self, timing: Any) -> None:
        """The baseline runner's null windows (``RUNNER_NULL_WINDOWS`` at most) and the baselines' own
        null windows bound the candidate's null base (kag.core.eval.judge.judge_timing.null_base_cap)."""
        from kag.core.eval.judge.judge_timing import median, null_base_cap

        runner_null = self.runner_nulls(min(len(timing.null_s), RUNNER_NULL_WINDOWS))
        baselines = self.baseline_values("null_ms")
        cap = null_base_cap(runner_null, baselines)
        if cap is None:
            return
        timing.base_cap_s = cap
        own = median(timing.null_s)
        self.report.calibration["runner_null_window_ms"] = median_ms(runner_null)
        self.report.calibration["baseline_null_windows_ms"] = [round(b * 1e3, 4) for b in baselines]
        self.report.calibration["null_base_cap_ms"] = round(cap * 1e3, 4)
        if own > cap:
            self.report.notes.append(f"timing: the candidate's null windows took {own * 1e3:.4g} ms against the "
                                     f"baseline runner's {median(runner_null) * 1e3:.4g} ms and the baselines' own "
                                     f"{', '.join(f'{b * 1e3:.4g}' for b in baselines) or 'none'}; its base counts "
                                     f"{cap * 1e3:.4g} ms")

    def runner_nulls(self, count: int, drained: bool = False) -> list[float]:
        """``count`` null windows of the baseline runner, each after a gap sized as the candidate's
        from parts it cannot stretch (``runner_pause_s``); [] without a runner."""
        if self.judge.runner is None:
            return []
        pause = self.runner_pause_s()
        self.report.calibration["runner_pause_ms"] = round(pause * 1e3, 3)
        return self.judge.runner_null_windows(count, pause, drained=drained)

    def baseline_values(self, field: str) -> tuple[float, ...]:
        """``field`` (milliseconds) of each baseline timed or cached in this evaluation, in seconds, where it
        has one: what the baselines lend the bounds on the candidate's base."""
        timed = [self.report.timing.get(name) for name, _ in self.spec.baselines]
        return tuple(getattr(s, field) * 1e-3 for s in timed if s is not None and getattr(s, field) is not None)

    def too_short(self, cand: CandidateProcess, timing: Any) -> int:
        """Windows of how many calls to time again, or 0: where the long windows held under a quarter
        of ``WINDOW_TARGET_S`` of the calls' work as measured, and twice their calls fit. The intercept
        cap bounds a padded short base's gain to ``(cap - F) / K`` a call, so it needs many calls; and
        the calls a window holds are sized by the candidate's own windows (judge_timing
        ``upper_per_call_s``), so a solution can be slow while they are sized and fast after.
        cancelled_tail_pad_long got windows of 5 calls (how its sizing came to 5 was not traced) and read
        16x eager for twice eager's work under the cap alone (tests/adversarial). Honest
        windows are sized to about ``WINDOW_TARGET_S`` of work and hold over a half of it."""
        from kag.core.eval.judge.judge_timing import MAX_CALLS, WINDOW_TARGET_S, median

        per_call = median(timing.per_call_s())
        if timing.calls >= MAX_CALLS or timing.calls * per_call >= WINDOW_TARGET_S / 4:
            return 0
        more = self.window_calls(cand, self.sets, per_call, self.spec.timeouts.load_s)
        if more < 2 * timing.calls:
            return 0
        self.report.notes.append(f"timing: windows of {timing.calls} calls held {timing.calls * per_call * 1e3:.3g} ms "
                                 f"of their work as measured; timed again with {more}")
        return more

    def cap_intercept(self, timing: Any) -> None:
        """The baseline runner's null windows, less their ends, and the baselines' own drained intercepts
        (timed before the candidate's windows, or cached with their timing) bound the drained intercept
        of the candidate's long and short windows (kag.core.eval.judge.judge_timing.intercept_cap)."""
        from kag.core.eval.judge.judge_timing import intercept_cap, median

        runner_null = self.runner_nulls(RUNNER_NULL_WINDOWS, drained=True)
        baselines = self.baseline_values("intercept_ms")
        cap = intercept_cap(runner_null, baselines)
        if cap is None:
            return
        timing.intercept_cap_s = cap
        own = timing.drained_intercept_s()
        self.report.calibration["runner_drained_null_ms"] = median_ms(runner_null)
        self.report.calibration["baseline_intercepts_ms"] = [round(b * 1e3, 4) for b in baselines]
        self.report.calibration["drained_intercept_ms"] = round(own * 1e3, 4)
        self.report.calibration["intercept_cap_ms"] = round(cap * 1e3, 4)
        if own > cap:
            self.report.notes.append(f"timing: the candidate's windows had an intercept of {own * 1e3:.4g} ms (a window "
                                     f"of no calls, by its long and short windows less the long ones' ends) against "
                                     f"the baseline runner's null windows of {median(runner_null) * 1e3:.4g} ms and "
                                     f"the baselines' own {', '.join(f'{b * 1e3:.4g}' for b in baselines) or 'none'}; its "
                                     f"short base counts {timing.base_s() * 1e3:.4g} ms, not "
                                     f"{median(timing.short_s) * 1e3:.4g}")

    def more_samples(self, cand: CandidateProcess, calls: int, deadline: float, counter: list[int],
                     limit_s: float, at_least: int = 0) -> bool:
        """``at_least`` sampled windows, then more until the provenance can judge
        (``CpuProvenance.enough``): at most ``EXTRA_SAMPLED_WINDOWS`` more, while a quarter of the time
        limit is left. A fallback whose samples came out few (a loaded machine, calls quicker than
        estimated) escaped on no verdict. False: the candidate failed in one (reported)."""
        from kag.core.eval.judge.judge_timing import EXTRA_SAMPLED_WINDOWS, Plan
        from kag.core.eval.judge.judge_windows import run_windows

        done = 0
        while self.judge.provenance is not None and (done < at_least or (
                not self.judge.provenance.enough() and done < at_least + EXTRA_SAMPLED_WINDOWS
                and deadline - time.monotonic() > 0.25 * limit_s)):
            batch = 16 if done >= at_least else min(16, at_least - done)
            more = run_windows(self.judge, cand, self.sets, Plan(calls=calls, order=["sampled"] * batch), purpose="timed",
                               timeout_s=limit_s, phase="sampling", after=self.rechecker(cand),
                               sampler=self.sampler, deadline=deadline, counter=counter)
            done += batch
            if more.failed:
                return False
        if done > at_least:
            self.report.calibration["extra_sampled_windows"] = done - at_least
        return True

    def sample_untimed(self, cand: CandidateProcess) -> bool:
        """Where no timing was asked for: sampled windows alone (untimed, outputs not compared), so that
        the provenance judges an untimed evaluation as it does a timed one."""
        from kag.core.eval.judge.judge_timing import UNTIMED_SAMPLED_WINDOWS

        if self.judge.provenance is None or self.cuda:  # on a GPU not yet run: untimed GPU evaluations unsampled
            return True
        limit = self.spec.timeouts.timing_s
        calls = self.window_calls(cand, self.sets, self.check_per_call_s, self.spec.timeouts.load_s)
        self.judge.provenance.expected_s = self.check_per_call_s
        return self.more_samples(cand, calls, time.monotonic() + limit, [0], limit, at_least=UNTIMED_SAMPLED_WINDOWS)

    def sampling(self) -> bool:
        """Whether sampled windows run (the candidate's CPU time sampled from outside: provenance)."""
        return self.judge.provenance is not None

    def sampler(self, calls: int, timing: Any) -> Any:
        """A fresh sampler for a sampled window of ``calls`` calls, its stops spread over a call's time
        as the last timed windows measured it, or the last sampled ones less their stops (the warm-up's
        and the checks' estimates, taken cold or under another load, were off by up to ten times)."""
        from kag.core.eval.judge.judge_timing import median

        if self.judge.provenance is None:
            return None
        measured = timing.timed_s or timing.sampled_s
        if measured and timing.calls:
            self.judge.provenance.expected_s = median(measured[-5:]) / timing.calls
        return self.judge.provenance.window_sampler(calls)

    def record_timing(self, timing: Any, plan: Any, pause: float) -> None:
        from kag.core.eval.judge.judge_timing import skipped_work
        from kag.core.eval.judge.timing import summarize

        estimates = timing.per_call_s()
        stats = summarize([e * 1000.0 for e in estimates])
        self.report.timing["candidate"] = stats
        self.report.times_ms["candidate"] = stats.median_ms
        resolution = timing.resolution_s()
        cal = self.report.calibration
        cal.update(window_summary(timing, plan), pause_ms=round(pause * 1e3, 3),
                   resolution_ms=round(resolution * 1e3, 5), recheck_probability=round(self.recheck_p, 5))
        credited = stats.median_ms
        if resolution * 1e3 > credited:
            credited = resolution * 1e3
            self.report.notes.append(f"the calls took {stats.median_ms:.4g} ms each, under what the judge's path resolves "
                                     f"({credited:.4g} ms): credited as that")
        self.report.times_ms["candidate"] = credited
        self.report.timing["candidate_window"] = summarize([w * 1000.0 for w in timing.timed_s])
        if self.judge.probe is not None and self.judge.probe.waits:
            cal["probe_waits"] = self.judge.probe.waits
        # judged in time_candidate, once the load of these windows is known
        self.skipped_why = skipped_work(estimates, [estimates[i] for i in timing.verified])

    def finish_candidate(self, cand: CandidateProcess, timed: bool) -> None:
        """Stop the observer; the guards judge what every call did; cross-check the candidate's
        own clock against the judge's; the provenance of its CPU time (sampled from outside)."""
        import math as _math

        from kag.core.eval.orchestrator.guarding import RunInfo, run_observation_guards
        from kag.core.eval.judge.judge_timing import cross_check
        from kag.core.eval.candidate.observations import Observations
        from kag.core.records import from_dict

        reply, _ = cand.exchange(("finish", None), self.spec.timeouts.check_s, "stopping the observer",
                                 expect="finished")
        obs = from_dict(Observations, reply[1]["observations"])
        own = [float(t) for t in reply[1].get("own_times_ms", [])]
        peak = reply[1].get("peak_memory_mb")
        if isinstance(peak, (int, float)) and _math.isfinite(peak) and peak >= 0:
            self.report.peak_memory_mb = float(peak)  # the candidate's report: shown, never scored
        info = RunInfo(device="cuda" if self.cuda else "cpu", solution_dir=os.path.dirname(self.spec.model_new_path),
                       extension_path=self.spec.extension_path, allow_cublas=bool(self.spec.guard_options.get("allow_cublas", True)),
                       allow_cudnn=bool(self.spec.guard_options.get("allow_cudnn", True)))
        guards = [self.plugins.create("guard", n, **self.spec.guard_options)
                  for n in self.spec.runtime_guards]
        for v in run_observation_guards(guards, obs, info):
            self.report.violations.append({"guard": str(v.guard), "detail": str(v.detail)})
        self.report.observed = {"calls": obs.calls, "ops": dict(sorted(obs.ops.items())[:20]),
                                "kernels": len(obs.kernels), "error": obs.error}
        if obs.recorder:
            self.report.observed["kernel_records"] = obs.recorder
        if obs.operators:
            self.report.observed["operators"] = obs.operators
        if obs.post_ops:  # solution code ran when an output was asked for: the work after the call
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(obs.post_ops.items())[:5])
            self.report.violations.append({"guard": "evaluator", "detail": (
                f"timing: the candidate ran {ops} while handing an output over: work done after its call "
                f"returned, where the call's time does not count it")})
        if self.judge.provenance is not None:
            eager_ms = self.report.times_ms.get("eager")  # the absolute rule's yardstick (timed windows only)
            self.judge.provenance.eager_s = eager_ms / 1e3 if timed and isinstance(eager_ms, (int, float)) and eager_ms > 0 else None
            for detail in self.judge.provenance.verdicts():  # the no-torch-fallback policy, checked by where the time goes
                self.report.violations.append({"guard": "no-torch-fallback", "detail": f"provenance: {detail}"})
            self.report.observed["cpu_samples"] = self.judge.provenance.summary()
            self.judge.provenance.close()
        path = reply[1].get("path_us")
        if timed and isinstance(path, dict):  # the candidate's own account of a call's path: shown only
            self.report.calibration["path_us"] = path_account(path)
        if timed and "candidate" in self.report.times_ms and own:
            self.report.calibration["own_ms"] = median_ms(own, 1.0)
            why = cross_check(own, self.report.times_ms["candidate"])
            if why:
                self.report.violations.append({"guard": "evaluator", "detail": f"timing: {why}"})
