"""The trusted judge: a spawned process that owns the reference, the seeds and the verdict.

It loads the task, builds ``Model`` under a fixed seed, times the baselines before any candidate
process exists, then spawns a fresh candidate process and drives it over a channel: weights and
inputs go out (the candidate gets its own copies, so writing into them cannot change what the
reference sees), outputs come back and are compared here. Reference outputs never leave this
process. Inputs are drawn from seeds made with ``secrets`` and created directly on the device.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import sys
import time
from typing import Any, Callable

from kag.core.candidate import die_with_parent
from kag.core.candidate_process import CandidateFailure, CandidateProcess
from kag.core.judge_inputs import clone_tree, fill_in_place, outputs_differ, to_device
from kag.core.reference64 import Float64Reference
from kag.core.trace import mark


BIG_OUTPUT_BYTES = 2 << 30  # above this, one timed iteration is re-checked instead of several


class Judge:
    def __init__(self, spec: dict[str, Any], notify: Callable[[tuple], None]):
        import torch

        from kag.core.candidate import rebuild_plugins
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
        self.buffer = self.make_inputs(self.secret)
        self.ref64 = Float64Reference(self.model, self.make_inputs)
        self.candidate: CandidateProcess | None = None
        self.output_bytes = 0  # of the reference's output, seen in the checks

    # -- inputs ---------------------------------------------------------------------------------
    def make_inputs(self, seed: int) -> list[Any]:
        import torch

        torch.manual_seed(seed)
        with torch.device(self.device):
            return list(to_device(self.ns["get_inputs"](), self.device))

    def refill(self, i: int) -> None:
        fresh = self.make_inputs(self.secret + 1000 + i)
        if not fill_in_place(self.buffer, fresh):
            raise RuntimeError("get_inputs() returned inputs of another shape or structure on a later call; "
                               "timing needs fixed input shapes")
        del fresh
        self.clock.synchronize()

    def compare(self, ref: Any, out: Any, tolerance: Any, seed: int, where: str) -> Any:
        """The first mismatch of ``out`` with the reference, None if it matches; a near miss is
        settled against the reference in float64 on the same inputs (kag.core.reference64)."""
        from kag.core.compare import compare_outputs

        return self.ref64.settle(compare_outputs(ref, out, tolerance), ref, out, tolerance, seed, where,
                                 self.report["notes"])

    def free(self) -> None:
        gc.collect()
        if self.cuda:
            import torch

            torch.cuda.empty_cache()

    # -- baselines ------------------------------------------------------------------------------
    def time_baselines(self) -> None:
        """Each baseline's timing from kag.core.baseline_cache (a verified, settled cache entry, or
        timed here until it settles); ``report["baseline_cache"][name]`` gets its ``info`` (source,
        status, age, runs: see ``BaselineCache.obtain``) and ``report["notes"]`` its warnings."""
        import torch

        from kag.core.baseline_cache import BaselineCache, BaselineKey
        from kag.core.timing import summarize, time_iterations

        spec = self.spec
        info = self.report["device"]
        device_key = info["name"] + ("" if self.cuda else f"/{info.get('threads')}t")
        cache = BaselineCache(spec.get("cache_dir"))
        for name, mode in spec["baselines"]:
            start = time.perf_counter()
            key = BaselineKey(spec["task_hash"], device_key, torch.__version__, name, mode, spec["num_timed"])
            prepared: list[Any] = []  # the baseline, prepared once however often it is timed

            def measure() -> Any:
                if not prepared:
                    prepared.append(self.plugins.create("baseline", name, mode=mode).prepare(self.model))
                with torch.no_grad():
                    return summarize(time_iterations(lambda: prepared[0](*self.buffer), self.refill, self.clock,
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

    # -- the candidate --------------------------------------------------------------------------
    def start_candidate(self, cand: CandidateProcess) -> CandidateProcess:
        """Hand the solution to the pre-started candidate process (only now, after the baselines,
        does any solution code run), then send it the reference weights and the input buffer."""
        spec = self.spec
        cspec = {k: spec[k] for k in ("task_code", "task_path", "device", "init_seed", "model_new_path",
                                      "module_dir", "runtime_guards", "plugin_selection")}
        cspec.update(guard_options=spec.get("guard_options", {}), plugin_builtins=spec.get("plugin_builtins", []))
        start = time.perf_counter()
        self.candidate = cand
        load_s = spec["timeouts"]["load_s"]
        cand.start(cspec, load_s)
        state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        cand.send(("state", state))
        loaded = cand.receive(load_s, "loading the reference weights into ModelNew")
        del state
        if loaded[1].get("unexpected") or loaded[1].get("missing"):
            self.report["notes"].append(f"state_dict keys not matched: {loaded[1]}")
        cand.send(("inputs", self.buffer))
        self.report["durations_s"]["load"] = round(time.perf_counter() - start, 3)
        return cand

    def check(self, cand: CandidateProcess) -> bool:
        import torch

        from kag.core.guarding import iter_tensors

        tolerance = self.plugins.create("tolerance", self.spec["tolerance"])
        n = self.spec["num_checks"]
        # The guarded call comes after a secret number (>= 1) of checks: a solution that counts its
        # calls cannot tell which one is watched, and its output is checked like the others.
        guard_at = secrets.SystemRandom().randint(1, n) if n > 0 else 0
        start = time.perf_counter()
        try:
            for k in range(n):
                seed = secrets.randbits(62) if self.spec.get("seed") is None else self.secret + 7 + k
                inputs = self.make_inputs(seed)
                if not fill_in_place(self.buffer, inputs):
                    self.buffer = clone_tree(inputs)
                    cand.send(("inputs", self.buffer))
                with torch.no_grad():
                    ref = self.model(*inputs)
                del inputs
                self.clock.synchronize()
                mark("judge", f"check {k + 1}: inputs and reference ready")
                cand.send(("check", k))
                reply = cand.receive(self.spec["timeouts"]["check_s"], f"check {k + 1} of {n}")
                mark("judge", f"check {k + 1}: outputs received")
                if reply[0] != "outputs" or reply[1] != k:
                    raise CandidateFailure("exception", f"check {k + 1}: unexpected reply {reply[0]!r}")
                out = clone_tree(reply[2])
                del reply
                mismatch = self.compare(ref, out, tolerance.tolerance, seed, f"check {k + 1}")
                self.output_bytes = sum(t.numel() * t.element_size() for t in iter_tensors(ref))
                del ref, out
                mark("judge", f"check {k + 1}: compared")
                if mismatch is not None:
                    self.report.update(correct=False, error_kind="mismatch",
                                       error=f"check {k + 1} of {n}: {mismatch}")
                    return False
                if k + 1 == guard_at:
                    t0 = time.perf_counter()
                    mismatch = self.runtime_violations(cand, tolerance.tolerance)
                    mark("judge", "guarded forward call checked")
                    self.report["durations_s"]["guards"] = round(time.perf_counter() - t0, 3)
                    if mismatch is not None:
                        text = f"the guarded forward call (after check {k + 1}): {mismatch}"
                        self.report["correct"] = False
                        if self.report["violations"]:  # the guard's reason is the verdict; keep this too
                            self.report["notes"].append(text)
                        else:
                            self.report.update(error_kind="mismatch", error=text)
                        return False
        finally:
            self.report["durations_s"]["checks"] = round(time.perf_counter() - start, 3)
            self.free()
        self.report["correct"] = True
        return True

    def fresh_seed(self, offset: int) -> int:
        return secrets.randbits(62) if self.spec.get("seed") is None else self.secret + offset

    def runtime_violations(self, cand: CandidateProcess, tolerance: Any) -> Any:
        """One untimed forward on inputs A inside every runtime guard; the output-reuse guard also
        runs forward on inputs B copied into the same tensors, and is told whether ref(A) != ref(B).
        Returns the mismatch of the last output (B's, else A's) with the reference, or None."""
        import torch

        from kag.core.guarding import describe_types

        if not self.spec.get("runtime_guards"):
            return None
        seeds = {"first": self.fresh_seed(500), "alternate": self.fresh_seed(501)}
        first = self.make_inputs(seeds["first"])
        if not fill_in_place(self.buffer, first):
            self.buffer = clone_tree(first)
            cand.send(("inputs", self.buffer))
        alternate = self.make_inputs(seeds["alternate"])
        with torch.no_grad():
            ref_a, ref_b = self.model(*first), self.model(*alternate)
        request = {"alternate": alternate, "reference_output_types": describe_types(ref_a),
                   "reference_outputs_differ": outputs_differ(ref_a, ref_b)}
        del first
        self.clock.synchronize()
        cand.send(("guards", request))
        reply = cand.receive(self.spec["timeouts"]["check_s"], "the guarded forward call")
        if reply[0] != "violations" or not isinstance(reply[1], list) or len(reply) < 4:
            raise CandidateFailure("exception", f"runtime guards: unexpected reply {reply[0]!r}")
        self.report["violations"] += [{"guard": str(v.get("guard")), "detail": str(v.get("detail"))}
                                      for v in reply[1] if isinstance(v, dict)]
        out = clone_tree(reply[3])
        which = "alternate" if reply[2] == "alternate" else "first"
        ref = ref_b if which == "alternate" else ref_a
        del request, alternate, reply, ref_a, ref_b
        mismatch = self.compare(ref, out, tolerance, seeds[which], "the guarded forward call")
        del ref, out
        self.free()
        return mismatch

    def recheck_timed(self, kept: Any, chosen: list[int]) -> None:
        """Compare the outputs of the secretly chosen timed iterations with the reference on the
        same inputs (regenerated here from their seeds)."""
        import torch


        tolerance = self.plugins.create("tolerance", self.spec["tolerance"])
        kept = kept if isinstance(kept, dict) else {}
        try:
            for i in chosen:
                if i not in kept:
                    raise CandidateFailure("exception", f"timing: the candidate did not return the output of "
                                                        f"timed iteration {i}")
                inputs = self.make_inputs(self.secret + 1000 + i)
                with torch.no_grad():
                    ref = self.model(*inputs)
                mismatch = self.compare(ref, clone_tree(kept[i]), tolerance.tolerance, self.secret + 1000 + i,
                                        f"timed iteration {i}")
                del inputs, ref
                if mismatch is not None:
                    self.report.update(correct=False, error_kind="mismatch",
                                       error=f"timed iteration {i} (re-checked after timing): {mismatch}")
                    return
        finally:
            self.free()

    def time_candidate(self, cand: CandidateProcess) -> None:
        from kag.core.records import TimingStats
        from kag.core.timing import summarize

        spec = self.spec
        iters = spec["num_timed"]
        deadline = time.monotonic() + spec["timeouts"]["timing_s"]
        start = time.perf_counter()
        # Re-checked iterations: chosen in secret, told to the candidate only after each one ran.
        count = min(int(spec.get("rechecked_iterations", 0)), iters) if spec["do_correctness"] else 0
        if self.output_bytes > BIG_OUTPUT_BYTES:  # the candidate holds a copy of each kept output
            count = min(count, 1)
        chosen = sorted(secrets.SystemRandom().sample(range(iters), count))
        cand.send(("time", {"warmup": spec["warmup"], "iters": iters}))
        marks: list[float] = []
        while True:
            msg = cand.receive(max(0.0, deadline - time.monotonic()), "timing")
            if msg[0] == "refill":
                marks.append(time.perf_counter())
                i = int(msg[1])
                if i < iters:
                    self.refill(i)
                cand.send(("filled", i, i - 1 in chosen))
            elif msg[0] == "timing":
                marks.append(time.perf_counter())
                info = msg[1]
                mark("judge", "timed iterations done")
                break
            else:
                raise CandidateFailure("exception", f"timing: unexpected message {msg[0]!r}")
        times = [float(t) for t in info.get("times", [])]
        if len(times) != iters or not all(t > 0 and t == t for t in times):
            raise CandidateFailure("exception", f"timing: the candidate reported {len(times)} times, expected "
                                                f"{iters} positive ones")
        # Each reported time must fit in the wall-clock interval the judge saw around it.
        walls = [(b - a) * 1000.0 for a, b in zip(marks, marks[1:])][:iters]
        over = [i for i, (t, w) in enumerate(zip(times, walls)) if t > w + 1.0]
        if over:
            self.report["violations"].append({"guard": "evaluator", "detail": (
                f"timing: {len(over)} reported iteration times exceed the wall-clock time the judge "
                f"observed (first: iteration {over[0]}, {times[over[0]]:.3f} ms > {walls[over[0]]:.3f} ms)")})
        stats: TimingStats = summarize(times)
        self.report["timing"]["candidate"] = stats
        self.report["times_ms"]["candidate"] = stats.median_ms
        self.report["timing"]["candidate_wall"] = summarize(walls)
        self.report["peak_memory_mb"] = info.get("peak_memory_mb")
        kept = info.get("kept")
        del info, msg
        if chosen:
            t0 = time.perf_counter()
            self.recheck_timed(kept, chosen)
            self.report["durations_s"]["recheck"] = round(time.perf_counter() - t0, 3)
        del kept
        self.report["durations_s"]["timing"] = round(time.perf_counter() - start, 3)


def judge_main(conn: Any) -> None:
    """Entry point of the spawned judge process.

    It starts before the orchestrator has built the solution and imports torch while the build
    runs; then it forks the candidate (no CUDA call has happened, so the fork is safe and the
    candidate needs no import of its own) and sends ("candidate", pid). It waits for ("spec",
    spec), whose ``visible_devices`` it applies before any CUDA call, and finally sends ("result",
    report); ("exit", None) instead of a spec ends it.
    """
    die_with_parent()
    os.dup2(2, 1)  # nothing the judge or torch prints may reach the caller's stdout (kag score --json)
    from kag.core.channel import OutputCapture

    mark("judge", "started")
    import torch  # noqa: F401 - imported while the orchestrator builds
    import torch.multiprocessing  # noqa: F401 - tensor reductions for the channel

    from kag.core.records import to_dict
    from kag.core.timing import device_info

    mark("judge", "torch imported")
    capture = OutputCapture(start=False)
    early = CandidateProcess(capture.path)  # forked now: no thread runs and CUDA is untouched
    capture.start()
    conn.send(("candidate", early.pid))
    msg = conn.recv()
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
        if spec["do_correctness"] or spec["do_timing"]:
            env = {"CUDA_VISIBLE_DEVICES": spec["visible_devices"]} if spec.get("visible_devices") is not None else {}
            early.prepare(spec["device"], env)
        judge = Judge(spec, conn.send)
        report = judge.report
        report["device"] = device_info(judge.device, spec["backend"])
        report["durations_s"]["reference"] = round(time.perf_counter() - start, 3)
        mark("judge", "reference ready")
        if spec["do_timing"]:
            judge.time_baselines()
            mark("judge", "baselines timed")
        if spec["do_correctness"] or spec["do_timing"]:
            cand = judge.start_candidate(early)
            mark("judge", "candidate loaded")
            ok = judge.check(cand) if spec["do_correctness"] else True  # runs the runtime guards too
            mark("judge", "checks done")
            if not spec["do_correctness"] and spec.get("runtime_guards"):
                report["notes"].append("runtime guards run only with the correctness checks (not in profile)")
            if ok and spec["do_timing"] and not report["violations"]:
                judge.time_candidate(cand)
                mark("judge", "timing done")
    except CandidateFailure as exc:
        report.update(correct=False, error_kind=exc.kind, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - the reference or the harness failed, not the candidate
        from kag.core.candidate import describe_exception

        report.update(error_kind="exception", judge_error=True,
                      error=f"the judge failed (reference model or evaluator): {describe_exception(exc)}")
    finally:
        early.close()
        report["candidate_output"] = capture.close()
        report.setdefault("durations_s", {})["judge"] = round(time.perf_counter() - start, 3)
        # JSON text, not pickled objects: a torch type left in the report would make the
        # orchestrator import torch (seconds) just to read the verdict
        conn.send(("result", json.dumps(to_dict(report), default=str)))
        mark("judge", "result sent")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the report is sent; skipping interpreter teardown frees the GPU sooner
