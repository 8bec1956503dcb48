"""The trusted judge: a spawned process that owns the reference, the seeds, the clock and the verdict.

It loads the task, builds ``Model`` under a fixed seed and times the baselines before any candidate
code exists. Its candidate process (forked at start, confined: kag.core.trust.isolation) then imports the
solution; the judge calibrates the candidate's call path first, sends the weights, and drives every
call itself: correctness checks on fresh secret inputs compared here (reference outputs never leave
this process), timed calls measured on this process's clock (kag.core.eval.judge_timing), outputs of
secretly chosen timed calls compared as they happen. The judge is not dumpable, so a process of the
same user cannot read its memory, environment or descriptors.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import shutil
import signal
import sys
import time
from typing import Any, Callable

from kag.core.eval.candidate_process import CandidateFailure, CandidateProcess
from kag.core.eval.judge_calls import CandidateCalls
from kag.core.eval.judge_inputs import fill_in_place, to_device
from kag.core.trust.procs import die_with_parent
from kag.core.eval.reference64 import Float64Reference
from kag.core.eval.spec import JudgeReport, JudgeSpec
from kag.core.records import from_dict, to_dict
from kag.core.trace import mark


class Judge(CandidateCalls):
    """The reference, its inputs and seeds, the baselines; the calls of the candidate are driven by
    ``CandidateCalls`` (kag.core.eval.judge_calls)."""

    def __init__(self, spec: JudgeSpec, notify: Callable[[tuple], None]):
        import torch

        from kag.core.trust.procs import rebuild_plugins
        from kag.core.tasks import load_module
        from kag.core.eval.timing import Clock

        self.spec = spec
        self.notify = notify
        self.device = spec.device
        self.cuda = self.device.startswith("cuda")
        self.plugins = rebuild_plugins(spec.plugin_selection, spec.plugin_builtins)
        self.report = JudgeReport()
        self.clock = Clock(self.device)
        self.ns = load_module(spec.task_code, spec.task_path)
        torch.manual_seed(spec.init_seed)
        init_inputs = self.ns["get_init_inputs"]()
        torch.manual_seed(spec.init_seed)
        with torch.device(self.device):
            self.model = self.ns["Model"](*init_inputs).to(self.device)
        self.secret = spec.seed
        if self.secret is None:
            self.secret = secrets.randbits(62)
        self.local = self.make_inputs(self.secret)  # the baselines' input buffer
        self.buffer: list[Any] = self.local  # the candidate's, shared with this process, once it exists
        self.ref64 = Float64Reference(self.model, self.make_inputs)
        self.tolerance = self.plugins.create("tolerance", spec.tolerance).tolerance
        self.probe: Any = None  # the GPU-idle probe, made once the candidate's device is up
        from kag.core.eval.judge_timing import CandidateTiming

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
        settled against the reference in float64 on the same inputs (kag.core.eval.reference64)."""
        from kag.core.eval.compare import compare_outputs

        return self.ref64.settle(compare_outputs(ref, out, self.tolerance), ref, out, self.tolerance, seed, where,
                                 self.report.notes)

    def free(self) -> None:
        gc.collect()
        if self.cuda:
            import torch

            torch.cuda.empty_cache()

    def fail(self, kind: str, error: str) -> bool:
        self.report.fail(kind, error)
        return False

    # -- baselines ------------------------------------------------------------------------------
    def time_baselines(self) -> None:
        """Each baseline's timing from kag.core.eval.baseline_cache (a verified, settled cache entry, or
        timed here until it settles); ``report.baseline_cache[name]`` gets its ``info`` (source,
        status, age, runs: see ``BaselineCache.obtain``) and ``report.notes`` its warnings."""
        import torch

        from kag.core.eval.baseline_cache import BaselineCache, BaselineKey
        from kag.core.eval.judge_timing import time_in_process
        from kag.core.eval.timing import summarize

        spec = self.spec
        info = self.report.device
        device_key = info["name"] + ("" if self.cuda else f"/{info.get('threads')}t")
        cache = BaselineCache(spec.cache_dir)
        saved, self.buffer = self.buffer, self.local
        try:
            for name, mode in spec.baselines:
                start = time.perf_counter()
                # "judge-wall": timed by kag.core.eval.judge_timing (entries timed otherwise are not reused)
                key = BaselineKey(spec.task_hash, device_key, torch.__version__, name, f"{mode}|judge-wall",
                                  spec.num_timed)
                prepared: list[Any] = []  # the baseline, prepared once however often it is timed

                def measure() -> Any:
                    if not prepared:
                        prepared.append(self.plugins.create("baseline", name, mode=mode).prepare(self.model))
                    with torch.no_grad():
                        return summarize(time_in_process(lambda: prepared[0](*self.local), self.refill,
                                                         self.clock.flush, self.clock.synchronize,
                                                         warmup=spec.warmup, iters=spec.num_timed))

                got = cache.obtain(key, measure, use_cache=spec.use_baseline_cache)
                self.report.baseline_cache[name] = got.info
                self.report.notes += got.notes
                if prepared:
                    prepared.clear()
                    if hasattr(torch, "_dynamo"):
                        torch._dynamo.reset()
                    self.free()
                stats = got.stats
                self.report.timing[name] = stats
                self.report.times_ms[name] = stats.median_ms
                self.report.durations_s[f"baseline_{name}"] = round(time.perf_counter() - start, 3)
        finally:
            self.buffer = saved


def judge_entry(fd: int) -> None:
    """``python -c`` entry of a judge: the orchestrator's end of the socket pair is ``fd``."""
    from multiprocessing.connection import Connection

    judge_main(Connection(fd))


def judge_main(conn: Any) -> None:
    """Entry point of the judge process (kag.core.eval.judge_process starts it with a minimal
    environment).

    It starts before the orchestrator has built the solution and imports torch while the build
    runs; then it forks its confined candidate (no CUDA call has happened, so the fork is safe and
    the candidate needs no import of its own) and sends ("candidate", pid). It waits for ("spec",
    spec), whose ``visible_devices`` it applies before any CUDA call, and finally sends ("result",
    report); ("exit", None) instead of a spec ends it.
    """
    from kag.core.trust.confine import set_child_subreaper, set_dumpable

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the orchestrator's to handle: it ends us
    set_dumpable(False)  # the candidate (same uid) cannot read this process's memory, environ or fds
    try:
        set_child_subreaper()  # orphans of the candidate come to us (swept when it ends)
    except OSError:
        pass
    os.dup2(2, 1)  # nothing the judge or torch prints may reach the caller's stdout (kag score --json)
    from kag.core.eval.channel import OutputCapture

    mark("judge", "started")
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # no CUDA driver call before the fork
    import torch  # noqa: F401 - imported while the orchestrator builds
    import torch.multiprocessing  # noqa: F401 - tensor reductions for the channel

    try:  # the compile baseline needs it, the candidate imports it before its identity snapshot:
        import torch._dynamo  # noqa: F401 - imported here, the fork hands it over (a second saved)
    except ImportError:
        pass

    from kag.core.trust.isolation import candidate_plan
    from kag.core.eval.timing import device_info

    mark("judge", "torch imported")
    capture = OutputCapture(start=False)
    plan = candidate_plan(cuda=os.path.exists("/dev/nvidiactl"))
    early = CandidateProcess(capture.path, plan)  # forked now: no thread runs and CUDA is untouched
    capture.start()
    conn.send(("candidate", early.pid, plan.tmp_dir))
    try:
        msg = conn.recv()
    except (EOFError, OSError):  # the orchestrator went away before using this judge (warm, unused)
        msg = None
    mark("judge", "spec received")
    if not isinstance(msg, tuple) or msg[0] != "spec":  # a warm judge no evaluation took
        early.close(grace_s=0.0)
        capture.close()
        shutil.rmtree(plan.tmp_dir, ignore_errors=True)
        return
    try:
        spec = from_dict(JudgeSpec, msg[1])
    except (ValueError, TypeError) as exc:  # an orchestrator of another kag version
        report = JudgeReport()
        report.fail("exception", f"the judge could not read its spec: {exc}", judge_error=True)
        early.close(grace_s=0.0)
        capture.close()
        shutil.rmtree(plan.tmp_dir, ignore_errors=True)
        conn.send(("result", json.dumps(to_dict(report), default=str)))
        return
    if spec.host_memory_bytes:
        early.host_memory_bytes = int(spec.host_memory_bytes)
    if spec.visible_devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = spec.visible_devices
    report = JudgeReport()
    judge: Judge | None = None
    start = time.perf_counter()
    try:
        env = {"CUDA_VISIBLE_DEVICES": spec.visible_devices} if spec.visible_devices is not None else {}
        early.resume()
        early.ring(3)  # OP_MSG: prepare runs while the judge loads the reference
        early.send(("prepare", {"device": spec.device, "env": env, "seccomp": plan.seccomp}))
        judge = Judge(spec, conn.send)
        report = judge.report
        mark("judge", "reference model and inputs made")
        prepared = early.receive(spec.timeouts.load_s, "starting the candidate process")
        if prepared[0] != "prepared":
            raise CandidateFailure("exception", f"starting the candidate: unexpected reply {prepared[0]!r}")
        early.stop()
        report.confinement = list(prepared[1].get("layers", []))
        report.device = device_info(judge.device, spec.backend)
        report.durations_s["reference"] = round(time.perf_counter() - start, 3)
        mark("judge", "reference ready")
        if spec.do_timing:
            conn.send(("phase", "timing the baselines"))
            judge.time_baselines()
            mark("judge", "baselines timed")
        conn.send(("phase", "loading the solution"))
        cand = judge.start_candidate(early)
        mark("judge", "candidate loaded")
        if spec.do_correctness:
            conn.send(("phase", f"checking {spec.num_checks} inputs"))
        ok = judge.check(cand) if spec.do_correctness else True
        mark("judge", "checks done")
        timed = False
        if ok and spec.do_timing:
            conn.send(("phase", f"timing {spec.num_timed} calls"))
            timed = judge.time_candidate(cand)
            mark("judge", "timing done")
        if ok and not report.error:
            judge.finish_candidate(cand, timed)
    except CandidateFailure as exc:
        report.fail(exc.kind, str(exc))
    except Exception as exc:  # noqa: BLE001 - the reference or the harness failed, not the candidate
        from kag.core.trust.procs import describe_exception

        report.fail("exception", f"the judge failed (reference model or evaluator): {describe_exception(exc)}",
                    judge_error=True)
    finally:
        early.close()
        shutil.rmtree(plan.tmp_dir, ignore_errors=True)
        report.candidate_output = capture.close()
        report.durations_s["judge"] = round(time.perf_counter() - start, 3)
        # JSON text, not pickled objects: a torch type left in the report would make the
        # orchestrator import torch (seconds) just to read the verdict
        conn.send(("result", json.dumps(to_dict(report), default=str)))
        mark("judge", "result sent")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the report is sent; skipping interpreter teardown frees the GPU sooner
