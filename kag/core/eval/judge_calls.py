"""The judge's side of every call of its candidate: calibration of the call path, the checks,
the timed calls with their secret re-checks, and what the guards make of the observed calls.

Trusted side. A mixin of ``kag.core.eval.judge.Judge`` (it uses the judge's reference, inputs, clock
and report); the candidate is driven through ``kag.core.eval.candidate_process.CandidateProcess``, and
every window it is timed by comes from ``kag.core.eval.judge_timing``.
"""

from __future__ import annotations

import io
import math
import os
import secrets
import time
from typing import Any

from kag.core.eval.candidate_process import CandidateFailure, CandidateProcess
from kag.core.eval.spec import JudgeReport, JudgeSpec
from kag.core.records import to_dict
from kag.core.trace import mark


def input_description(inputs: list[Any], device: str) -> dict[str, Any]:
    """How the candidate allocates its input buffer: shapes, strides and dtypes of the tensors,
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
    from kag.core.eval.judge_timing import median

    return round(median(xs) * scale, digits) if xs else None


NOT_IN_MEMORY = object()  # outputs_as_answered: a CPU output not where the call's answer put it


class CandidateCalls:
    """What the judge does with its candidate, call by call (a part of ``Judge``, which holds these)."""

    spec: JudgeSpec
    report: JudgeReport

    def settle(self) -> None:
        """Flush the cache and wait for the judge's own GPU work: where every call and hand-over of
        the candidate starts from (and so where the calibration's do)."""
        self.clock.flush()
        self.clock.synchronize()

    def start_candidate(self, cand: CandidateProcess) -> CandidateProcess:
        """Calibrate the candidate's path while no solution code exists in it, then have it import
        the solution, load the reference weights and allocate the input buffer it shares with us."""
        import torch

        from kag.core.eval.candidate import output_descr
        import attrs

        from kag.core.eval.judge_timing import NULL_CALLS, POST_CALIBRATIONS, GpuProbe, PathCalibration
        from kag.core.eval.timing_lock import LoadMeter

        spec = self.spec
        load_s = spec.timeouts.load_s
        start = time.perf_counter()
        if self.cuda:  # the candidate is stopped and its device idle: the probe's idle latency now
            self.probe = GpuProbe(self.device, CandidateFailure)
        cand.probe = self.probe
        cand.spin = self.cuda
        with torch.no_grad():
            descr = output_descr(self.model(*self.local))
        self.free()
        self.cal = PathCalibration()
        phase = "calibrating the candidate's path"
        # the profiler is on from here to the last timed call; the path is calibrated under the
        # session the timed calls run under (no GPU kernel records: kag.core.eval.observe)
        cand.exchange(("observe", {"kernels": False}), load_s, phase, expect="observing")
        meter = LoadMeter((cand.pid,))
        # what is subtracted from every timed call is timed as they are: in the device's timing slot
        with self.timing_slot().exclusive() as slot, meter.measuring():
            for i in range(NULL_CALLS):  # each after the judge's own work, as a timed call comes
                self.settle()
                self.cal.null_s.append(cand.call(i, load_s, phase, null=True))
            if self.probe is not None:
                self.cal.probe_waits, self.probe.waits = self.probe.waits, 0
            for _ in range(POST_CALIBRATIONS):
                cand.exchange(("dummy", descr), load_s, phase, expect="dummy")
                self.settle()  # the judge's context last on the GPU, as after a timed call's re-check
                reply, window = cand.exchange(("post", {"call": -1, "send": True}), load_s, phase, expect="post")
                self.cal.post_s.append(window)
                del reply
        cond = attrs.evolve(slot)
        meter.fill(cond)
        self.report.timing_load["calibration"] = attrs.asdict(cond)
        cand.exchange(("dummy", None), load_s, phase, expect="dummy")
        self.free()
        self.report.calibration = {"null_call_us": round(self.cal.null_overhead_s * 1e6, 2),
                                      "post_us": median_ms(self.cal.post_s, 1e6, 1)}
        if self.probe is not None:
            self.report.calibration["idle_probe_us"] = round(self.probe.idle_s * 1e6, 2)
        reply, _ = cand.exchange(("buffers", input_description(self.local, self.device)), load_s,
                                 "allocating the input buffer", expect="buffers")
        self.buffer = list(reply[1])
        cspec = to_dict(spec.candidate())  # all the candidate is told of the task
        if spec.reference_calibration and spec.do_timing and self.report.times_ms.get("eager"):
            self.calibrate_with_reference(cand, cspec, self.report.times_ms["eager"] / 1000.0)
        cand.exchange(("spec", cspec), load_s, "importing model_new.py and building ModelNew", expect="ready")
        buf = io.BytesIO()
        torch.save({k: v.detach().to("cpu") for k, v in self.model.state_dict().items()}, buf)
        loaded, _ = cand.exchange(("state", buf.getvalue()), load_s, "loading the reference weights into ModelNew",
                                  expect="loaded")
        del buf
        if loaded[1].get("unexpected") or loaded[1].get("missing"):
            self.report.notes.append(f"state_dict keys not matched: {loaded[1]}")
        cand.exchange(("observe", {"kernels": True}), load_s, "starting the observer", expect="observing")
        self.report.durations_s["load"] = round(time.perf_counter() - start, 3)
        return cand

    def calibrate_with_reference(self, cand: CandidateProcess, cspec: dict[str, Any], eager_s: float) -> None:
        """Time the task's own Model through the candidate's path, as timed calls are timed,
        before any solution code exists there. What its calls take beyond eager in the
        judge's process (``eager_s``) is the path's cost for this task's footprint (the switch to
        the candidate's GPU context and back, its cold address translations), subtracted from
        every call of the solution as the null path's is on the CPU."""
        from kag.core.eval.judge_timing import REFERENCE_CALLS, REFERENCE_WARMUP

        load_s = self.spec.timeouts.load_s
        phase = "timing the reference through the candidate's path"
        # under the session the timed calls run under, marked as the harness's (not forward's)
        cand.exchange(("reference", cspec), load_s, phase, expect="reference")
        windows = []
        for k in range(REFERENCE_WARMUP + REFERENCE_CALLS):
            self.refill(k + 50_000)
            self.settle()
            window = cand.call(k + 50_000, load_s, phase)
            if k >= REFERENCE_WARMUP:
                windows.append(window)
        cand.exchange(("drop", None), load_s, phase, expect="dropped")
        self.free()
        self.cal.reference_s, self.cal.eager_s = windows, eager_s
        self.report.calibration.update(reference_window_ms=median_ms(windows),
                                          path_us=round(self.cal.overhead_s * 1e6, 2))

    def post(self, cand: CandidateProcess, k: int, timeout_s: float, phase: str) -> tuple[Any, float]:
        """The output of call ``k`` (shared memory; the candidate is stopped while it is read)."""
        reply, window = cand.exchange(("post", {"call": k, "send": True}), timeout_s, phase, expect="post")
        if reply[1] != k:
            raise CandidateFailure("exception", f"{phase}: the candidate handed over the output of another call")
        return reply[2], window

    def outputs_as_answered(self, cand: CandidateProcess, ref: Any) -> Any:
        """On the CPU: the outputs of the last call read from the stopped candidate's memory where
        its answer said they are, so nothing it does after answering can change them (no work can
        be put off until the output is asked for). None where there is nothing to read there (GPU
        memory, an output with no tensor); NOT_IN_MEMORY where the answer did not put the outputs'
        tensors there, contiguous and laid out as the reference's (the harness makes them so)."""
        import torch

        from kag.core.eval.guarding import iter_tensors
        from kag.core.eval.judge_inputs import replace_tensors

        tensors = list(iter_tensors(ref))
        if self.cuda or not tensors:
            return None
        if len(tensors) != len(cand.extents):
            return NOT_IN_MEMORY
        read = []
        for t, (address, size) in zip(tensors, cand.extents):
            if not address or size != t.numel() * t.element_size():
                return NOT_IN_MEMORY
            data = bytearray(cand.read_memory(address, size))
            read.append(torch.frombuffer(data, dtype=t.dtype).reshape(t.shape))
        return replace_tensors(ref, iter(read))

    def check(self, cand: CandidateProcess) -> bool:
        """The correctness checks: fresh secret inputs in the shared buffer, one call each (the same
        path as a timed call), every output compared."""
        import torch

        from kag.core.eval.judge_timing import CandidateTiming

        n = self.spec.num_checks
        limit = self.spec.timeouts.check_s
        self.check_timing = CandidateTiming()
        start = time.perf_counter()
        try:
            for k in range(n):
                seed = secrets.randbits(62) if self.spec.seed is None else self.derived_seed("check", k)
                inputs = self.make_inputs(seed)
                self.fill(inputs)
                with torch.no_grad():
                    ref = self.model(*inputs)
                del inputs
                self.settle()
                mark("judge", f"check {k + 1}: inputs and reference ready")
                phase = f"check {k + 1} of {n}"
                self.check_timing.windows_s.append(cand.call(k, limit, phase))
                out, window = self.post(cand, k, limit, phase)
                self.check_timing.post_s.append(window)
                mismatch = self.compare(ref, out, seed, f"check {k + 1}")
                del ref, out
                mark("judge", f"check {k + 1}: compared")
                if mismatch is not None:
                    return self.fail("mismatch", f"check {k + 1} of {n}: {mismatch}")
        finally:
            self.report.durations_s["checks"] = round(time.perf_counter() - start, 3)
            self.free()
        self.report.correct = True
        return True

    def time_candidate(self, cand: CandidateProcess) -> bool:
        """Timed calls on the judge's clock; the outputs of RECHECKED of them, chosen in secret,
        compared as they happen."""
        import attrs

        from kag.core.eval.timing_lock import LoadMeter

        spec = self.spec
        cand.exchange(("observe", {"kernels": False}), spec.timeouts.load_s, "starting the timing observer",
                      expect="observing")
        meter = LoadMeter((cand.pid,))
        with self.timing_slot().exclusive() as slot:  # machine-wide: no other timing, no heavy work
            with meter.measuring():
                timed = self.timed_calls(cand)
            cond = attrs.evolve(slot)
            meter.fill(cond)
        self.report.timing_load["candidate"] = attrs.asdict(cond)
        return timed

    def timed_calls(self, cand: CandidateProcess) -> bool:
        import torch

        from kag.core.eval.judge_timing import CandidateTiming, choose_rechecked

        spec = self.spec
        warmup, iters = spec.warmup, spec.num_timed
        deadline = time.monotonic() + spec.timeouts.timing_s
        chosen = choose_rechecked(iters, spec.do_correctness)
        timing = CandidateTiming()
        start = time.perf_counter()
        self.report.rechecked_calls = len(chosen)
        spent = {"refill": 0.0, "calls": 0.0, "rechecks": 0.0}  # where the judge's time went
        for k in range(warmup + iters):
            i = k - warmup
            t0 = time.perf_counter()
            self.refill(k + 100_000)
            self.settle()
            left = deadline - time.monotonic()
            if left <= 0:
                raise CandidateFailure("timeout", f"timing did not finish within {spec.timeouts.timing_s:g} s")
            t1 = time.perf_counter()
            window = cand.call(k + 100_000, left, "timing")
            t2 = time.perf_counter()
            spent["refill"] += t1 - t0
            spent["calls"] += t2 - t1
            if i < 0:
                continue
            timing.windows_s.append(window)
            if i in chosen:
                seed = self.timed_seed(k + 100_000)
                inputs = self.make_inputs(seed)
                with torch.no_grad():
                    ref = self.model(*inputs)
                del inputs
                out = self.outputs_as_answered(cand, ref)
                if out is NOT_IN_MEMORY:
                    # the harness makes CPU outputs plain contiguous tensors; one that is not where the
                    # answer says could be computed when handed over (an object's __reduce_ex__)
                    self.fail("mismatch", f"timed call {i} (one of {len(chosen)} checked in secret): its output was "
                                          f"not in memory where the call's answer put it (not plain tensors laid out "
                                          f"as the reference's)")
                    return False
                if out is None:  # on a GPU: the candidate hands them over (a measured window)
                    self.clock.synchronize()  # the judge's own work (inputs, reference) is not in the window
                    out, post_window = self.post(cand, k + 100_000, left, "timing")
                    timing.post_s.append(post_window)
                mismatch = self.compare(ref, out, seed, f"timed call {i}")
                del ref, out
                spent["rechecks"] += time.perf_counter() - t2
                if mismatch is not None:
                    self.fail("mismatch", f"timed call {i} (one of {len(chosen)} checked in secret): {mismatch}")
                    return False
                timing.verified.append(len(timing.windows_s) - 1)
        for part, seconds in spent.items():
            self.report.durations_s[f"timing_{part}"] = round(seconds, 3)
        self.record_timing(timing)
        self.report.durations_s["timing"] = round(time.perf_counter() - start, 3)
        mark("judge", "timed calls done")
        return True

    def record_timing(self, timing: Any) -> None:
        from kag.core.eval.judge_timing import resolution_s, skipped_work
        from kag.core.eval.timing import summarize

        # the timed calls' hand-overs, compared with the calibration's (made under the same profiler
        # session: the checks' records kernels, which slows CUDA calls). On the CPU a rechecked call's
        # output is read from the stopped candidate's memory where its answer said it is, so no work
        # can be put off until it is asked for: there is no hand-over, and no fold, unless the output
        # could not be read that way. The checks' hand-overs are not the timed calls' (a loaded 2-core
        # machine made them ~35 ms slower than calibrated for an honest CPU ReLU: charged to every call,
        # it made it 16x slower than eager instead of about as fast)
        merged = type(timing)(windows_s=timing.windows_s, post_s=timing.post_s)
        estimates, fold = merged.estimates_s(self.cal)
        checked, _ = self.check_timing.estimates_s(self.cal, with_fold=False)  # a floor: never raised by a fold
        stats = summarize([e * 1000.0 for e in estimates])
        threshold = merged.fold_threshold_s(self.cal)
        self.report.calibration.update(window_ms=median_ms(timing.windows_s), post_ms=median_ms(merged.post_s),
                                          post_calibrated_ms=median_ms(self.cal.post_s), fold_ms=round(fold * 1e3, 4),
                                          fold_threshold_ms=None if threshold is None else round(threshold * 1e3, 4))
        self.report.timing["candidate"] = stats
        self.report.times_ms["candidate"] = stats.median_ms
        floor_ms = resolution_s(self.cal) * 1e3
        self.report.calibration["resolution_ms"] = round(floor_ms, 4)
        if stats.median_ms < floor_ms:  # below what the path can resolve: credited at its resolution
            self.report.times_ms["candidate"] = floor_ms
            self.report.notes.append(f"the timed calls' median, {stats.median_ms:.4g} ms, is under what the judge's "
                                     f"path resolves ({floor_ms:.4g} ms, a quarter of its null call): credited as "
                                     f"{floor_ms:.4g} ms")
        self.report.timing["candidate_window"] = summarize([w * 1000.0 for w in timing.windows_s])
        if fold > 0:
            self.report.notes.append(f"handing over outputs took {fold * 1e3:.4g} ms longer than calibrated: "
                                        f"added to every timed call (work done after the call returned)")
        if self.probe is not None and self.probe.waits:
            self.report.calibration["probe_waits"] = {"null_calls": self.cal.probe_waits,
                                                         "calls": self.probe.waits}
        why = skipped_work(estimates, [estimates[i] for i in timing.verified] + checked)
        if why:
            self.report.violations.append({"guard": "evaluator", "detail": f"timing: {why}"})

    def finish_candidate(self, cand: CandidateProcess, timed: bool) -> None:
        """Stop the observer; the guards judge what every call did; cross-check the candidate's
        own clock against the judge's."""
        from kag.core.eval.guarding import RunInfo, run_observation_guards
        from kag.core.eval.judge_timing import cross_check
        from kag.core.eval.observe import Observations
        from kag.core.records import from_dict

        reply, _ = cand.exchange(("finish", None), self.spec.timeouts.check_s, "stopping the observer",
                                 expect="finished")
        obs = from_dict(Observations, reply[1]["observations"])
        own = [float(t) for t in reply[1].get("own_times_ms", [])]
        peak = reply[1].get("peak_memory_mb")
        if isinstance(peak, (int, float)) and math.isfinite(peak) and peak >= 0:
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
        if obs.post_ops:  # solution code ran when an output was asked for: the work after the call
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(obs.post_ops.items())[:5])
            self.report.violations.append({"guard": "evaluator", "detail": (
                f"timing: the candidate ran {ops} while handing an output over: work done after its call "
                f"returned, where the call's time does not count it")})
        if timed and "candidate" in self.report.times_ms:
            own_timed = own[-self.spec.num_timed:]
            if own_timed and self.report.calibration:
                self.report.calibration["own_ms"] = median_ms(own_timed, 1.0)
            # against the calls' windows alone: the hand-over fold (work found when outputs were asked
            # for) is charged to every call but is not inside the candidate's own clock, and a loaded
            # machine makes it large for honest solutions
            fold_ms = float(self.report.calibration.get("fold_ms") or 0.0)
            why = cross_check(own_timed, self.report.timing["candidate"].median_ms - fold_ms)
            if why:
                self.report.violations.append({"guard": "evaluator", "detail": f"timing: {why}"})
