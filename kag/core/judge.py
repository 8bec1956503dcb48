"""The trusted judge: a spawned process that owns the reference, the seeds, the clock and the verdict.

It loads the task, builds ``Model`` under a fixed seed and times the baselines before any candidate
code exists. Its candidate process (forked at start, confined: kag.core.isolation) then imports the
solution; the judge calibrates the candidate's call path first, sends the weights, and drives every
call itself: correctness checks on fresh secret inputs compared here (reference outputs never leave
this process), timed calls measured on this process's clock (kag.core.judge_timing), outputs of
secretly chosen timed calls compared as they happen. The judge is not dumpable, so a process of the
same user cannot read its memory, environment or descriptors.
"""

from __future__ import annotations

import gc
import io
import json
import os
import secrets
import shutil
import sys
import time
from typing import Any, Callable

from kag.core.candidate_process import CandidateFailure, CandidateProcess
from kag.core.judge_inputs import fill_in_place, to_device
from kag.core.procs import die_with_parent
from kag.core.reference64 import Float64Reference
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


class Judge:
    def __init__(self, spec: dict[str, Any], notify: Callable[[tuple], None]):
        import torch

        from kag.core.procs import rebuild_plugins
        from kag.core.tasks import load_module
        from kag.core.timing import Clock

        self.spec = spec
        self.notify = notify
        self.device = spec["device"]
        self.cuda = self.device.startswith("cuda")
        self.plugins = rebuild_plugins(spec.get("plugin_selection", {}), spec.get("plugin_builtins", ()))
        self.report: dict[str, Any] = {"timing": {}, "times_ms": {}, "durations_s": {}, "baseline_cache": {},
                                       "violations": [], "notes": []}
        self.clock = Clock(self.device)
        self.ns = load_module(spec["task_code"], spec["task_path"])
        torch.manual_seed(spec["init_seed"])
        init_inputs = self.ns["get_init_inputs"]()
        torch.manual_seed(spec["init_seed"])
        with torch.device(self.device):
            self.model = self.ns["Model"](*init_inputs).to(self.device)
        self.secret = spec.get("seed")
        if self.secret is None:
            self.secret = secrets.randbits(62)
        self.local = self.make_inputs(self.secret)  # the baselines' input buffer
        self.buffer: list[Any] = self.local  # the candidate's, shared with this process, once it exists
        self.ref64 = Float64Reference(self.model, self.make_inputs)
        self.tolerance = self.plugins.create("tolerance", spec["tolerance"]).tolerance
        self.probe: Any = None  # the GPU-idle probe, made once the candidate's device is up
        from kag.core.judge_timing import CandidateTiming

        self.check_timing = CandidateTiming()  # the checks' calls (none in profile mode)

    # -- inputs ---------------------------------------------------------------------------------
    def make_inputs(self, seed: int) -> list[Any]:
        import torch

        torch.manual_seed(seed)
        with torch.device(self.device):
            return list(to_device(self.ns["get_inputs"](), self.device))

    def timed_seed(self, k: int) -> int:
        return self.secret + 1000 + k

    def fill(self, inputs: list[Any]) -> None:
        if not fill_in_place(self.buffer, inputs):
            raise RuntimeError("get_inputs() returned inputs of another shape or structure on a later call; "
                               "timing needs fixed input shapes")
        self.clock.synchronize()

    def refill(self, k: int) -> None:
        fresh = self.make_inputs(self.timed_seed(k))
        self.fill(fresh)
        del fresh

    def compare(self, ref: Any, out: Any, seed: int, where: str) -> Any:
        """The first mismatch of ``out`` with the reference, None if it matches; a near miss is
        settled against the reference in float64 on the same inputs (kag.core.reference64)."""
        from kag.core.compare import compare_outputs

        return self.ref64.settle(compare_outputs(ref, out, self.tolerance), ref, out, self.tolerance, seed, where,
                                 self.report["notes"])

    def free(self) -> None:
        gc.collect()
        if self.cuda:
            import torch

            torch.cuda.empty_cache()

    def fail(self, kind: str, error: str) -> bool:
        self.report.update(correct=False, error_kind=kind, error=error)
        return False

    # -- baselines ------------------------------------------------------------------------------
    def time_baselines(self) -> None:
        """Each baseline's timing from kag.core.baseline_cache (a verified, settled cache entry, or
        timed here until it settles); ``report["baseline_cache"][name]`` gets its ``info`` (source,
        status, age, runs: see ``BaselineCache.obtain``) and ``report["notes"]`` its warnings."""
        import torch

        from kag.core.baseline_cache import BaselineCache, BaselineKey
        from kag.core.judge_timing import time_in_process
        from kag.core.timing import summarize

        spec = self.spec
        info = self.report["device"]
        device_key = info["name"] + ("" if self.cuda else f"/{info.get('threads')}t")
        cache = BaselineCache(spec.get("cache_dir"))
        saved, self.buffer = self.buffer, self.local
        try:
            for name, mode in spec["baselines"]:
                start = time.perf_counter()
                # "judge-wall": timed by kag.core.judge_timing (entries timed otherwise are not reused)
                key = BaselineKey(spec["task_hash"], device_key, torch.__version__, name, f"{mode}|judge-wall",
                                  spec["num_timed"])
                prepared: list[Any] = []  # the baseline, prepared once however often it is timed

                def measure() -> Any:
                    if not prepared:
                        prepared.append(self.plugins.create("baseline", name, mode=mode).prepare(self.model))
                    with torch.no_grad():
                        return summarize(time_in_process(lambda: prepared[0](*self.local), self.refill,
                                                         self.clock.flush, self.clock.synchronize,
                                                         warmup=spec["warmup"], iters=spec["num_timed"]))

                got = cache.obtain(key, measure, use_cache=spec.get("use_baseline_cache", True))
                self.report["baseline_cache"][name] = got.info
                self.report["notes"] += got.notes
                if prepared:
                    prepared.clear()
                    if hasattr(torch, "_dynamo"):
                        torch._dynamo.reset()
                    self.free()
                stats = got.stats
                self.report["timing"][name] = stats
                self.report["times_ms"][name] = stats.median_ms
                self.report["durations_s"][f"baseline_{name}"] = round(time.perf_counter() - start, 3)
        finally:
            self.buffer = saved

    # -- the candidate --------------------------------------------------------------------------
    def start_candidate(self, cand: CandidateProcess) -> CandidateProcess:
        """Calibrate the candidate's path while no solution code exists in it, then have it import
        the solution, load the reference weights and allocate the input buffer it shares with us."""
        import torch

        from kag.core.candidate import output_descr
        from kag.core.judge_timing import NULL_CALLS, POST_CALIBRATIONS, GpuProbe, PathCalibration

        spec = self.spec
        load_s = spec["timeouts"]["load_s"]
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
        # session the timed calls run under (no GPU kernel records: kag.core.observe)
        cand.exchange(("observe", {"kernels": False}), load_s, phase, expect="observing")
        for i in range(NULL_CALLS):
            self.cal.null_s.append(cand.call(i, load_s, phase, null=True))
        for _ in range(POST_CALIBRATIONS):
            cand.exchange(("dummy", descr), load_s, phase, expect="dummy")
            reply, window = cand.exchange(("post", {"call": -1, "send": True}), load_s, phase, expect="post")
            self.cal.post_s.append(window)
            del reply
        cand.exchange(("dummy", None), load_s, phase, expect="dummy")
        self.free()
        self.report["calibration"] = {"null_call_us": round(self.cal.overhead_s * 1e6, 2),
                                      "post_us": round(sorted(self.cal.post_s)[len(self.cal.post_s) // 2] * 1e6, 1)}
        if self.probe is not None:
            self.report["calibration"]["idle_probe_us"] = round(self.probe.idle_s * 1e6, 2)
        cspec = {k: spec[k] for k in ("task_code", "task_path", "init_seed", "model_new_path", "module_dir")}
        cand.exchange(("spec", cspec), load_s, "importing model_new.py and building ModelNew", expect="ready")
        buf = io.BytesIO()
        torch.save({k: v.detach().to("cpu") for k, v in self.model.state_dict().items()}, buf)
        loaded, _ = cand.exchange(("state", buf.getvalue()), load_s, "loading the reference weights into ModelNew",
                                  expect="loaded")
        del buf
        if loaded[1].get("unexpected") or loaded[1].get("missing"):
            self.report["notes"].append(f"state_dict keys not matched: {loaded[1]}")
        reply, _ = cand.exchange(("buffers", input_description(self.local, self.device)), load_s,
                                 "allocating the input buffer", expect="buffers")
        self.buffer = list(reply[1])
        cand.exchange(("observe", {"kernels": True}), load_s, "starting the observer", expect="observing")
        self.report["durations_s"]["load"] = round(time.perf_counter() - start, 3)
        return cand

    def post(self, cand: CandidateProcess, k: int, timeout_s: float, phase: str) -> tuple[Any, float]:
        """The output of call ``k`` (shared memory; the candidate is stopped while it is read)."""
        reply, window = cand.exchange(("post", {"call": k, "send": True}), timeout_s, phase, expect="post")
        if reply[1] != k:
            raise CandidateFailure("exception", f"{phase}: the candidate handed over the output of another call")
        return reply[2], window

    def outputs_as_answered(self, cand: CandidateProcess, ref: Any) -> Any:
        """On the CPU: the outputs of the last call read from the stopped candidate's memory where
        its answer said they are, so nothing it does after answering can change them (no work can
        be put off until the output is asked for). None when that is not possible (GPU memory, an
        output that is not a contiguous tensor laid out as the reference's)."""
        import torch

        from kag.core.guarding import iter_tensors
        from kag.core.judge_inputs import replace_tensors

        tensors = list(iter_tensors(ref))
        if self.cuda or not tensors or len(tensors) != len(cand.extents):
            return None
        read = []
        for t, (address, size) in zip(tensors, cand.extents):
            if not address or size != t.numel() * t.element_size():
                return None
            data = bytearray(cand.read_memory(address, size))
            read.append(torch.frombuffer(data, dtype=t.dtype).reshape(t.shape))
        return replace_tensors(ref, iter(read))

    def check(self, cand: CandidateProcess) -> bool:
        """The correctness checks: fresh secret inputs in the shared buffer, one call each (the same
        path as a timed call), every output compared."""
        import torch

        from kag.core.judge_timing import CandidateTiming

        n = self.spec["num_checks"]
        limit = self.spec["timeouts"]["check_s"]
        self.check_timing = CandidateTiming()
        start = time.perf_counter()
        try:
            for k in range(n):
                seed = secrets.randbits(62) if self.spec.get("seed") is None else self.secret + 7 + k
                inputs = self.make_inputs(seed)
                self.fill(inputs)
                with torch.no_grad():
                    ref = self.model(*inputs)
                del inputs
                self.clock.flush()
                self.clock.synchronize()
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
            self.report["durations_s"]["checks"] = round(time.perf_counter() - start, 3)
            self.free()
        self.report["correct"] = True
        return True

    def time_candidate(self, cand: CandidateProcess) -> bool:
        """Timed calls on the judge's clock; the outputs of RECHECKED of them, chosen in secret,
        compared as they happen."""
        import torch

        from kag.core.judge_timing import CandidateTiming, choose_rechecked

        spec = self.spec
        warmup, iters = spec["warmup"], spec["num_timed"]
        deadline = time.monotonic() + spec["timeouts"]["timing_s"]
        chosen = choose_rechecked(iters, spec["do_correctness"])
        timing = CandidateTiming()
        cand.exchange(("observe", {"kernels": False}), spec["timeouts"]["load_s"], "starting the timing observer",
                      expect="observing")
        start = time.perf_counter()
        self.report["rechecked_calls"] = len(chosen)
        spent = {"refill": 0.0, "calls": 0.0, "rechecks": 0.0}  # where the judge's time went
        for k in range(warmup + iters):
            i = k - warmup
            t0 = time.perf_counter()
            self.refill(k + 100_000)
            self.clock.flush()
            self.clock.synchronize()
            left = deadline - time.monotonic()
            if left <= 0:
                raise CandidateFailure("timeout", f"timing did not finish within {spec['timeouts']['timing_s']:g} s")
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
                if out is None:  # on a GPU: the candidate hands them over (a measured window)
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
            self.report["durations_s"][f"timing_{part}"] = round(seconds, 3)
        self.record_timing(timing)
        self.report["durations_s"]["timing"] = round(time.perf_counter() - start, 3)
        mark("judge", "timed calls done")
        return True

    def record_timing(self, timing: Any) -> None:
        from kag.core.judge_timing import skipped_work
        from kag.core.timing import summarize

        # the hand-overs of the checks count too: the candidate cannot tell them apart either
        merged = type(timing)(windows_s=timing.windows_s, post_s=timing.post_s + self.check_timing.post_s)
        estimates, fold = merged.estimates_s(self.cal)
        checked, _ = self.check_timing.estimates_s(self.cal)
        stats = summarize([e * 1000.0 for e in estimates])
        med = lambda xs: round(sorted(xs)[len(xs) // 2] * 1e3, 4) if xs else None  # noqa: E731
        self.report["calibration"].update(window_ms=med(timing.windows_s), post_ms=med(merged.post_s),
                                          post_calibrated_ms=med(self.cal.post_s), fold_ms=round(fold * 1e3, 4))
        self.report["timing"]["candidate"] = stats
        self.report["times_ms"]["candidate"] = stats.median_ms
        self.report["timing"]["candidate_window"] = summarize([w * 1000.0 for w in timing.windows_s])
        if fold > 0:
            self.report["notes"].append(f"handing over outputs took {fold * 1e3:.4g} ms longer than calibrated: "
                                        f"added to every timed call (work done after the call returned)")
        if self.probe is not None and self.probe.waits:
            self.report["notes"].append(f"the judge's probe found the GPU still busy {self.probe.waits} times after "
                                        f"a call returned (the wait is part of the call's time)")
        why = skipped_work(estimates, [estimates[i] for i in timing.verified] + checked)
        if why:
            self.report["violations"].append({"guard": "evaluator", "detail": f"timing: {why}"})

    def finish_candidate(self, cand: CandidateProcess, timed: bool) -> None:
        """Stop the observer; the guards judge what every call did; cross-check the candidate's
        own clock against the judge's."""
        from kag.core.guarding import RunInfo, run_observation_guards
        from kag.core.judge_timing import cross_check
        from kag.core.observe import Observations
        from kag.core.records import from_dict

        reply, _ = cand.exchange(("finish", None), self.spec["timeouts"]["check_s"], "stopping the observer",
                                 expect="finished")
        obs = from_dict(Observations, reply[1]["observations"])
        own = [float(t) for t in reply[1].get("own_times_ms", [])]
        info = RunInfo(device="cuda" if self.cuda else "cpu", solution_dir=os.path.dirname(self.spec["model_new_path"]),
                       extension_path=self.spec.get("extension_path"), allow_cublas=bool(self.spec.get("guard_options", {}).get("allow_cublas", True)),
                       allow_cudnn=bool(self.spec.get("guard_options", {}).get("allow_cudnn", True)))
        guards = [self.plugins.create("guard", n, **self.spec.get("guard_options", {}))
                  for n in self.spec.get("runtime_guards", [])]
        for v in run_observation_guards(guards, obs, info):
            self.report["violations"].append({"guard": str(v.guard), "detail": str(v.detail)})
        self.report["observed"] = {"calls": obs.calls, "ops": dict(sorted(obs.ops.items())[:20]),
                                   "kernels": len(obs.kernels), "error": obs.error}
        if obs.post_ops:  # solution code ran when an output was asked for: the work after the call
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(obs.post_ops.items())[:5])
            self.report["violations"].append({"guard": "evaluator", "detail": (
                f"timing: the candidate ran {ops} while handing an output over: work done after its call "
                f"returned, where the call's time does not count it")})
        if timed and "candidate" in self.report["times_ms"]:
            why = cross_check(own[-self.spec["num_timed"]:], self.report["times_ms"]["candidate"])
            if why:
                self.report["violations"].append({"guard": "evaluator", "detail": f"timing: {why}"})


def judge_entry(fd: int) -> None:
    """``python -c`` entry of a judge: the orchestrator's end of the socket pair is ``fd``."""
    from multiprocessing.connection import Connection

    judge_main(Connection(fd))


def judge_main(conn: Any) -> None:
    """Entry point of the judge process (kag.core.judge_process starts it with a minimal
    environment).

    It starts before the orchestrator has built the solution and imports torch while the build
    runs; then it forks its confined candidate (no CUDA call has happened, so the fork is safe and
    the candidate needs no import of its own) and sends ("candidate", pid). It waits for ("spec",
    spec), whose ``visible_devices`` it applies before any CUDA call, and finally sends ("result",
    report); ("exit", None) instead of a spec ends it.
    """
    from kag.core.confine import set_child_subreaper, set_dumpable

    die_with_parent()
    set_dumpable(False)  # the candidate (same uid) cannot read this process's memory, environ or fds
    try:
        set_child_subreaper()  # orphans of the candidate come to us (swept when it ends)
    except OSError:
        pass
    os.dup2(2, 1)  # nothing the judge or torch prints may reach the caller's stdout (kag score --json)
    from kag.core.channel import OutputCapture

    mark("judge", "started")
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # no CUDA driver call before the fork
    import torch  # noqa: F401 - imported while the orchestrator builds
    import torch.multiprocessing  # noqa: F401 - tensor reductions for the channel

    from kag.core.isolation import candidate_plan
    from kag.core.records import to_dict
    from kag.core.timing import device_info

    mark("judge", "torch imported")
    capture = OutputCapture(start=False)
    plan = candidate_plan(cuda=os.path.exists("/dev/nvidiactl"))
    early = CandidateProcess(capture.path, plan)  # forked now: no thread runs and CUDA is untouched
    capture.start()
    conn.send(("candidate", early.pid))
    try:
        msg = conn.recv()
    except (EOFError, OSError):  # the orchestrator went away before using this judge (warm, unused)
        msg = None
    mark("judge", "spec received")
    if not isinstance(msg, tuple) or msg[0] != "spec":
        early.close(grace_s=0.0)
        capture.close()
        return
    spec = msg[1]
    if spec.get("host_memory_bytes"):
        early.host_memory_bytes = int(spec["host_memory_bytes"])
    if spec.get("visible_devices") is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = spec["visible_devices"]
    report: dict[str, Any] = {}
    judge: Judge | None = None
    start = time.perf_counter()
    try:
        env = {"CUDA_VISIBLE_DEVICES": spec["visible_devices"]} if spec.get("visible_devices") is not None else {}
        early.resume()
        early.ring(3)  # OP_MSG: prepare runs while the judge loads the reference
        early.send(("prepare", {"device": spec["device"], "env": env, "seccomp": plan.seccomp}))
        judge = Judge(spec, conn.send)
        report = judge.report
        prepared = early.receive(spec["timeouts"]["load_s"], "starting the candidate process")
        if prepared[0] != "prepared":
            raise CandidateFailure("exception", f"starting the candidate: unexpected reply {prepared[0]!r}")
        early.stop()
        report["confinement"] = list(prepared[1].get("layers", []))
        report["device"] = device_info(judge.device, spec["backend"])
        report["durations_s"]["reference"] = round(time.perf_counter() - start, 3)
        mark("judge", "reference ready")
        if spec["do_timing"]:
            judge.time_baselines()
            mark("judge", "baselines timed")
        cand = judge.start_candidate(early)
        mark("judge", "candidate loaded")
        ok = judge.check(cand) if spec["do_correctness"] else True
        mark("judge", "checks done")
        timed = False
        if ok and spec["do_timing"]:
            timed = judge.time_candidate(cand)
            mark("judge", "timing done")
        if ok and not report.get("error"):
            judge.finish_candidate(cand, timed)
    except CandidateFailure as exc:
        report.update(correct=False, error_kind=exc.kind, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - the reference or the harness failed, not the candidate
        from kag.core.procs import describe_exception

        report.update(error_kind="exception", judge_error=True,
                      error=f"the judge failed (reference model or evaluator): {describe_exception(exc)}")
    finally:
        early.close()
        shutil.rmtree(plan.tmp_dir, ignore_errors=True)
        report["candidate_output"] = capture.close()
        report.setdefault("durations_s", {})["judge"] = round(time.perf_counter() - start, 3)
        # JSON text, not pickled objects: a torch type left in the report would make the
        # orchestrator import torch (seconds) just to read the verdict
        conn.send(("result", json.dumps(to_dict(report), default=str)))
        mark("judge", "result sent")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the report is sent; skipping interpreter teardown frees the GPU sooner
