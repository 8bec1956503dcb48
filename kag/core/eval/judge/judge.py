"""The trusted judge: a spawned process that owns the reference, the seeds, the clock and the verdict.

It loads the task and builds ``Model`` under a fixed seed. It forks two children at start, before
any CUDA call: the candidate (confined: kag.core.trust.isolation) and the baseline runner (the same
harness, unconfined, for the task's own code). The candidate imports the solution; the judge sends
the weights and drives every call itself: correctness checks on fresh secret inputs compared here
(reference outputs never leave this process) first, so a failed solution costs its build and its
checks; then, for a correct one, the baselines in the runner (the candidate stopped meanwhile) and
the candidate, through the same windows (kag.core.eval.judge.judge_windows), measured on this process's
clock (kag.core.eval.judge.judge_timing), outputs of calls chosen in secret compared after each window. The judge is not dumpable, so a process of
the same user cannot read its memory, environment or descriptors.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import attrs

from kag.core.eval.judge.candidate_process import CandidateFailure, CandidateProcess
from kag.core.eval.judge.judge_calls import CandidateCalls, path_account
from kag.core.eval.judge.judge_inputs import fill_in_place, to_device
from kag.core.trust.procs import die_with_parent
from kag.core.eval.judge.reference64 import Float64Reference
from kag.core.eval.boundary import JudgeReport, JudgeSpec
from kag.core.records import from_dict, to_dict
from kag.core.trace import mark


class Judge:
    """The reference, its inputs and seeds, the baselines; the calls of the candidate are driven by
    the ``CandidateCalls`` it holds (``self.calls``, kag.core.eval.judge.judge_calls)."""

    def __init__(self, spec: JudgeSpec, notify: Callable[[tuple], None]):
        import torch

        from kag.core.trust.procs import rebuild_plugins
        from kag.core.tasks import load_module
        from kag.core.eval.judge.timing import Clock

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
        # every seed of this evaluation's inputs is a keyed hash of one secret key: from one input a
        # solution can recover the 32 bits torch seeds its CPU generator with, and with seeds a step
        # apart it predicted every later timed call's inputs (and precomputed their outputs: 39x eager)
        self.key = (secrets.token_bytes(32) if spec.seed is None
                    else hashlib.blake2b(f"kag-seed:{spec.seed}".encode(), digest_size=32).digest())
        self.local = self.make_inputs(self.derived_seed("baseline", 0))  # one input set: its shapes, and ...
        with torch.no_grad():
            self.reference_output = self.model(*self.local)  # ... an output's (what the sets and hand-overs hold)
        self.ref64 = Float64Reference(self.model, self.make_inputs)
        self.tolerance = self.plugins.create("tolerance", spec.tolerance).tolerance
        self.probe: Any = None  # the GPU-idle probe, made once the candidate's device is up
        self.runner: Any = None  # the baseline runner (kag.core.eval.judge.candidate_process.CandidateProcess)
        self.runner_ready = False
        self.provenance: Any = None  # the candidate's CPU time sampled from outside (kag.core.trust.provenance)
        self.calls = CandidateCalls(self)  # the candidate's calls, driven with this judge's state

    def settle(self) -> None:
        """Flush the cache and wait for the judge's own GPU work: where every window and hand-over
        of the candidate starts from (and so where the calibration's do)."""
        self.clock.flush()
        self.clock.synchronize()

    # -- inputs ---------------------------------------------------------------------------------
    def make_inputs(self, seed: int) -> list[Any]:
        import torch

        torch.manual_seed(seed)
        with torch.device(self.device):
            return list(to_device(self.ns["get_inputs"](), self.device))

    def derived_seed(self, purpose: str, k: int) -> int:
        """A 62-bit seed for input set ``k`` of ``purpose``, unrelated to every other one's to anyone
        without the key."""
        digest = hashlib.blake2b(f"{purpose}:{k}".encode(), key=self.key, digest_size=8).digest()
        return int.from_bytes(digest, "little") >> 2

    def timed_seed(self, k: int) -> int:
        return self.derived_seed("timed", k)

    def fill(self, target: list[Any], inputs: list[Any]) -> None:
        """Copy ``inputs`` into the shared input set ``target`` (the next window's)."""
        if not fill_in_place(target, inputs):
            raise RuntimeError("get_inputs() returned inputs of another shape or structure on a later call; "
                               "timing needs fixed input shapes")

    def compare(self, ref: Any, out: Any, seed: int, where: str) -> Any:
        """The first mismatch of ``out`` with the reference, None if it matches; a near miss is
        settled against the reference in float64 on the same inputs (kag.core.eval.judge.reference64)."""
        from kag.core.eval.judge.compare import compare_outputs

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
    def timing_slot(self) -> Any:
        """The machine-wide timing slot of this evaluation's device (kag.core.eval.orchestrator.timing_lock)."""
        from kag.core.eval.orchestrator.timing_lock import TimingSlot, slot_name

        name = self.spec.timing_slot or slot_name(self.device, self.spec.visible_devices)
        return TimingSlot(name, self.spec.lock_dir)

    def time_baselines(self, names: list[str] | None = None, use_cache: bool | None = None) -> dict[str, Any]:
        """Each baseline's timing from kag.core.eval.orchestrator.baseline_cache (a verified, settled cache entry, or
        timed in the runner, holding the device's timing slot, until it settles; cached only if it
        was timed on a quiet machine); ``report.baseline_cache[name]`` gets its ``info`` (source,
        status, age, runs: see ``BaselineCache.obtain``) and ``report.notes`` its warnings. Returns
        each timed baseline's ``TimingConditions`` (none for a cache hit)."""
        import torch

        from kag.core.eval.orchestrator.baseline_cache import BaselineCache, baseline_key
        from kag.core.eval.judge.timing import summarize
        from kag.core.eval.orchestrator.timing_lock import LoadMeter

        spec = self.spec
        info = self.report.device
        cache = BaselineCache(spec.cache_dir)
        conditions: dict[str, Any] = {}
        with self.timing_slot().exclusive() as slot:
            for name, mode in spec.baselines:
                if names is not None and name not in names:
                    continue
                start = time.perf_counter()
                key = baseline_key(spec.task_hash, info, torch.__version__, name, mode, spec.num_timed)
                loaded: list[bool] = []  # the runner holds this baseline, prepared once however often it is timed
                meter = LoadMeter((self.runner.pid,) if self.runner is not None else ())

                def measure() -> Any:
                    if not loaded:
                        self.load_baseline(name, mode)
                        loaded.append(True)
                    with meter.measuring():
                        per_call_ms, intercept_ms, null_ms = self.time_runner(name)
                    return attrs.evolve(summarize(per_call_ms), intercept_ms=intercept_ms, null_ms=null_ms)

                def measured() -> Any:  # the slot's wait with the load of the timed windows so far
                    cond = attrs.evolve(slot)
                    meter.fill(cond)
                    return cond

                got = cache.obtain(key, measure, use_cache=spec.use_baseline_cache if use_cache is None else use_cache,
                                   conditions=measured)
                if got.info["source"] == "timed":
                    conditions[name] = measured()
                self.report.baseline_cache[name] = got.info
                self.report.notes += got.notes
                if loaded:
                    reply, _ = self.runner.exchange(("drop", None), spec.timeouts.load_s, "freeing a baseline",
                                                    expect="dropped")
                    summary = self.report.calibration.get("baselines", {}).get(name)
                    if summary is not None and isinstance(reply[1], dict):  # the runner's own account: shown only
                        summary["path_us"] = path_account(reply[1])
                stats = got.stats
                self.report.timing[name] = stats
                self.report.times_ms[name] = stats.median_ms
                self.report.durations_s[f"baseline_{name}"] = round(time.perf_counter() - start, 3)
        self.report.timing_load.setdefault("baselines", {}).update(
            {n: attrs.asdict(c) for n, c in conditions.items()})
        return conditions

    def prepare_runner(self) -> None:
        """The runner's device, once (its CUDA context, as the candidate's is made)."""
        if self.runner_ready:
            return
        if self.runner is None:
            raise RuntimeError("no baseline runner: the judge was started without one")
        env = {"CUDA_VISIBLE_DEVICES": self.spec.visible_devices} if self.spec.visible_devices is not None else {}
        bell = os.environ.get("KAG_BELL", "1" if self.cuda else "0") == "1"
        self.runner.fast = bell
        self.runner.exchange(("prepare", {"device": self.spec.device, "env": env, "seccomp": False, "wall": None,
                                          "bell": bell}),
                             self.spec.timeouts.load_s, "starting the baseline runner", expect="prepared")
        self.runner.spin = self.cuda
        self.runner_ready = True

    def load_baseline(self, name: str, mode: str) -> None:
        """The runner builds the task's Model and prepares it as baseline ``name`` (compiled later,
        at its first call, inside a warm-up window)."""
        self.prepare_runner()
        self.runner.probe = self.probe_for_runner()
        arg = {"spec": to_dict(self.spec.candidate()), "name": name, "mode": mode,
               "plugin_selection": self.spec.plugin_selection, "plugin_builtins": self.spec.plugin_builtins}
        self.runner.exchange(("baseline", arg), self.spec.timeouts.load_s, f"building the {name} baseline",
                             expect="baseline")
        self.runner_sets: list[list[Any]] = []

    def runner_null_windows(self, count: int, pause_s: float, drained: bool = False) -> list[float]:
        """``count`` null windows of the baseline runner, under its observer as the candidate's run,
        each after a gap of ``pause_s`` (a resumed process's cold start grows with the gap); [] without
        a runner. ``drained``: each less its end (``WindowTiming.drained_null_s``). Trusted: the runner
        holds no solution code."""
        from kag.core.eval.judge.judge_timing import Plan
        from kag.core.eval.judge.judge_windows import run_windows

        if self.runner is None or count <= 0:
            return []
        self.prepare_runner()
        self.runner.probe = self.probe_for_runner()
        limit = self.spec.timeouts.load_s
        self.runner.exchange(("observe", {"kernels": True}), limit, "starting the runner's observer", expect="observing")
        try:
            timing = run_windows(self, self.runner, [], Plan(calls=1, order=["null"] * count), purpose="runner-null",
                                 timeout_s=limit + count * (pause_s + 0.1), phase="the runner's null windows",
                                 pause_s=pause_s)
        finally:
            self.runner.exchange(("drop", None), limit, "freeing the runner", expect="dropped")
        return timing.drained_null_s() if drained else timing.null_s

    def probe_for_runner(self) -> Any:
        return self.gpu_probe()

    def gpu_probe(self) -> Any:
        """The judge's GPU-idle probe (made once, while its children are idle); None on the CPU."""
        if not self.cuda:
            return None
        if self.probe is None:
            from kag.core.eval.judge.candidate_process import CandidateFailure
            from kag.core.eval.judge.judge_timing import GpuProbe

            self.probe = GpuProbe(self.device, CandidateFailure)
        return self.probe

    def time_runner(self, name: str) -> tuple[list[float], float | None, float | None]:
        """One timing of the baseline the runner holds: warm-up (torch.compile compiles in the
        first window), then timed and null windows in a secret order. Per-call milliseconds, the
        windows' drained intercept in milliseconds where they had short ones (a GPU), and the median
        null window in milliseconds where they had null ones (the CPU)."""
        from kag.core.eval.judge.judge_calls import window_summary
        from kag.core.eval.judge.judge_timing import Plan, median, timed_windows, warmup_windows
        from kag.core.eval.judge.judge_windows import run_windows

        spec = self.spec
        budget = spec.timeouts.baseline_s
        deadline = time.monotonic() + budget
        runner = self.runner
        first = self.calls.window_calls(runner, self.runner_sets, 1e-3, spec.timeouts.load_s)  # 2 sets where they fit
        counter = getattr(self, "_baseline_counter", [0])
        self._baseline_counter = counter
        # the first window compiles (torch.compile) and loads kernels lazily: not counted
        run_windows(self, runner, self.runner_sets, Plan(calls=first, order=["timed"]), purpose=f"baseline-{name}",
                    timeout_s=budget, phase=f"warming up the {name} baseline", deadline=deadline, counter=counter)
        # the candidate's calls all run under a profiler session with kernel records
        # (kag.core.eval.candidate.observe); the baseline's do too, so a cost of that path is paid by both sides.
        # It starts after the first window: torch.compile compiled under a profiler session makes a
        # call that costs twice its CPU time ever after (level1/12 on an H200: 0.106 ms a call against
        # 0.057 compiled first; bench/results/2026-11-27-compile-baseline/)
        runner.exchange(("observe", {"kernels": True}), spec.timeouts.load_s,
                        f"starting the {name} baseline's observer", expect="observing")

        def sizing(plan: Plan) -> Any:  # the windows' calls sized under the observer, as the candidate's are
            return run_windows(self, runner, self.runner_sets, plan, purpose=f"baseline-{name}", timeout_s=budget,
                               phase=f"warming up the {name} baseline", deadline=deadline, counter=counter)

        calls, _, _ = self.calls.sized_calls(runner, self.runner_sets, first, sizing)
        plan = Plan.make(calls, timed=timed_windows(calls, spec.num_timed, self.cuda),
                         warmup=warmup_windows(calls, spec.warmup, self.cuda),
                         sampled=0)
        timing = run_windows(self, runner, self.runner_sets, plan, purpose=f"baseline-{name}", timeout_s=budget,
                             phase=f"timing the {name} baseline", deadline=deadline, counter=counter)
        self.report.calibration.setdefault("baselines", {})[name] = window_summary(timing, plan)
        resolution = timing.resolution_s()
        intercept = timing.drained_intercept_s() * 1e3 if timing.short_s and timing.timed_s else None
        null = median(timing.null_s) * 1e3 if timing.null_s and not timing.short_s else None
        return [max(t, resolution) * 1000.0 for t in timing.per_call_s()], intercept, null

    def retime_baselines(self, timed: dict[str, Any]) -> None:
        """After the candidate is gone: re-time, uncached, each baseline whose timing conditions
        (``timed``; a cache hit was timed quiet) differ from the candidate's timed calls', and keep
        whichever of its timings was taken under the conditions nearest the candidate's."""
        from kag.core.eval.orchestrator.timing_lock import TimingConditions, differ

        cand = self.report.timing_load.get("candidate")
        if not cand or "candidate" not in self.report.times_ms:
            return
        cand_cond = TimingConditions(**cand)
        quiet = TimingConditions(slot=cand_cond.slot, locked=True, cpus=cand_cond.cpus, others_cpus=0.0)
        before = {n: timed.get(n, quiet) for n, _ in self.spec.baselines if n in self.report.times_ms}
        redo = [n for n, c in before.items() if differ(c, cand_cond)]
        if not redo:
            return
        old = {n: (self.report.timing[n], self.report.baseline_cache.get(n)) for n in redo}
        again = self.time_baselines(redo, use_cache=False)
        for name in redo:
            new = again.get(name)
            if new is None:
                continue
            kept = "re-timed"
            if abs(before[name].others_share - cand_cond.others_share) < abs(new.others_share - cand_cond.others_share):
                self.report.timing[name], self.report.baseline_cache[name] = old[name]
                self.report.times_ms[name] = old[name][0].median_ms
                kept = "first"
            self.report.baseline_cache[name]["retimed"] = {
                "why": "timed under other conditions than the candidate's calls", "kept": kept,
                "first_ms": round(old[name][0].median_ms, 4), "first_others_cpus": before[name].others_cpus,
                "candidate_others_cpus": cand_cond.others_cpus, "again_others_cpus": new.others_cpus}
            self.report.notes.append(
                f"baseline {name}: timed with {before[name].others_cpus} other CPUs busy, the candidate with "
                f"{cand_cond.others_cpus}: re-timed after the candidate ({new.others_cpus}), kept the {kept} timing")


def cpu_provenance(spec: JudgeSpec, cand: CandidateProcess) -> Any:
    """The sampler of where the candidate's CPU time goes (kag.core.trust.provenance): the
    no-torch-fallback policy's runtime check that the work is the solution's, whoever calls
    PyTorch. None when that guard is not selected (``kag profile``, a run that allows PyTorch) or
    this machine cannot read a stopped process."""
    if "no-torch-fallback" not in spec.runtime_guards:
        return None
    from kag.core.trust.provenance import CpuProvenance

    return CpuProvenance.for_process(cand.pid, spec.module_dir, cand, gpu=spec.device.startswith("cuda"))


def judge_entry(fd: int) -> None:
    """``python -c`` entry of a judge: the orchestrator's end of the socket pair is ``fd``."""
    from multiprocessing.connection import Connection

    judge_main(Connection(fd))


def evaluation_namespaces() -> list[str]:
    """The evaluation's own /dev/shm (kag.core.trust.isolation.private_shm), with the run's folders
    that lie under it (a TMPDIR there, the locks, the cache, the timeline) bound back in, and its own
    System V IPC (private_ipc). What was done, for the confinement report."""
    import tempfile

    from kag.core.eval.orchestrator.build import cache_root
    from kag.core.eval.orchestrator.timing_lock import lock_dir
    from kag.core.trust.isolation import evals_root, private_ipc, private_shm

    keep = [tempfile.gettempdir(), str(lock_dir()), str(cache_root()), evals_root(),
            os.path.dirname(os.environ.get("KAG_TIMELINE", "")), os.environ.get("RAY_TMPDIR", "")]
    return [private_shm(p for p in keep if p), private_ipc()]


def judge_main(conn: Any) -> None:
    """Entry point of the judge process (kag.core.eval.orchestrator.judge_process starts it with a minimal
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
    namespaces = evaluation_namespaces()  # first, while one thread: a mount namespace is per thread until then
    from kag.core.eval.judge.heap import steady_heap

    heap = steady_heap()  # before the forks: the candidate and the baseline runner allocate alike
    try:
        set_child_subreaper()  # orphans of the candidate come to us (swept when it ends)
    except OSError:
        pass
    os.dup2(2, 1)  # nothing the judge or torch prints may reach the caller's stdout (kag score --json)
    from kag.core.eval.judge.output_capture import OutputCapture

    from kag.core import timeline

    timeline.set_role("judge")
    mark("judge", "started")
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # no CUDA driver call before the fork
    from kag.core.eval.orchestrator.timing_lock import host_work

    with host_work():  # seconds of CPU-heavy imports: not while another evaluation times on this host's CPU
        mark("judge", "wait: host slot (torch import)")
        import torch  # noqa: F401 - imported while the orchestrator builds
        import torch.multiprocessing  # noqa: F401 - tensor reductions for the channel

        try:  # the compile baseline needs it, the candidate imports it before its identity snapshot:
            import torch._dynamo  # noqa: F401 - imported here, the fork hands it over (a second saved)
        except ImportError:
            pass
        from kag.core.eval.candidate import op_counter
        from kag.core.eval.judge import op_counter_lib

        # loaded before the forks: the candidate and the baseline runner count operators with one library
        counter_dir = tempfile.mkdtemp(prefix="kag-opc-")
        op_counter.LOADED, how = op_counter_lib.load(folder=Path(counter_dir))
        mark("judge", f"operator counter: {how if op_counter.LOADED is None else 'loaded (' + how + ')'}")

    from kag.core.trust.isolation import candidate_plan
    from kag.core.eval.judge.timing import device_info

    mark("judge", "torch imported")
    capture = OutputCapture(start=False)
    plan = candidate_plan(cuda=os.path.exists("/dev/nvidiactl"))
    plan.applied.extend(namespaces)
    early = CandidateProcess(capture.path, plan)  # forked now: no thread runs and CUDA is untouched
    runner = CandidateProcess(None, None)  # the baseline runner: the same harness, unconfined (trusted code)
    early.spare.add(runner.pid)
    capture.start()
    from kag.core.eval.judge.priority import above_its_children

    above_its_children(early.pid, runner.pid)
    try:
        import multiprocessing.util

        # the orchestrator removes these after a Ctrl-C kills us (multiprocessing's: made after the forks)
        conn.send(("candidate", early.pid, plan.tmp_dir, capture.dir, multiprocessing.util.get_temp_dir(), counter_dir))
        msg = conn.recv()
    except (EOFError, OSError):  # the orchestrator went away before using this judge (warm, unused, a Ctrl-C)
        msg = None
    mark("judge", "spec received")

    def end_children() -> None:
        runner.close(grace_s=0.0)
        early.close(grace_s=0.0)
        capture.close()
        shutil.rmtree(plan.tmp_dir, ignore_errors=True)
        shutil.rmtree(counter_dir, ignore_errors=True)

    if not isinstance(msg, tuple) or msg[0] != "spec":  # a warm judge no evaluation took
        end_children()
        return
    try:
        spec = from_dict(JudgeSpec, msg[1])
    except (ValueError, TypeError) as exc:  # an orchestrator of another kag version
        report = JudgeReport()
        report.fail("exception", f"the judge could not read its spec: {exc}", judge_error=True)
        end_children()
        conn.send(("result", json.dumps(to_dict(report), default=str)))
        return
    if spec.trace_lane:  # this evaluation's phases join its worker's lane in the run's timeline
        timeline.set_lane(f"{spec.trace_lane} judge")
    if spec.host_memory_bytes:
        early.host_memory_bytes = int(spec.host_memory_bytes)
    if spec.visible_devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = spec.visible_devices
    report = JudgeReport()
    judge: Judge | None = None
    start = time.perf_counter()
    try:
        env = {"CUDA_VISIBLE_DEVICES": spec.visible_devices} if spec.visible_devices is not None else {}
        wall = None  # PyTorch's CUDA kernels out of the candidate's reach, where the policy forbids them
        if spec.device.startswith("cuda") and plan.seccomp and "no-torch-fallback" in spec.runtime_guards:
            from kag.core.eval.orchestrator.build import cache_root
            from kag.core.trust.fatbin_wall import allowed, library_scan
            from kag.core.trust.nvrtc_wall import task_uses_cudnn

            wall = {k: bool(spec.guard_options.get(k, True)) for k in ("allow_cublas", "allow_cudnn")}
            wall["allow_cudnn"] = wall["allow_cudnn"] and task_uses_cudnn(spec.task_code)  # cuDNN for conv
            wall["close_nvrtc"] = not wall["allow_cudnn"]  # cuDNN needs NVRTC (kag.core.trust.nvrtc_wall)
            scan = library_scan(cache_dir=str(cache_root()))
            wall["sections"] = scan["sections"]  # unreadable to the candidate
            wall["nvrtc_code"] = scan["compilers"] if wall["close_nvrtc"] else {}  # likewise
            wall["unreadable"] = [p for p in scan["sections"] if not allowed(p, wall["allow_cublas"], wall["allow_cudnn"])]
        early.resume()
        early.ring(3)  # OP_MSG: prepare runs while the judge loads the reference
        # a GPU machine has cores to spare for polling a shared word; KAG_BELL=1/0 forces it (tests)
        bell = os.environ.get("KAG_BELL", "1" if spec.device.startswith("cuda") else "0") == "1"
        early.fast = bell
        early.send(("prepare", {"device": spec.device, "env": env, "seccomp": plan.seccomp, "wall": wall, "bell": bell}))
        with host_work(spec.lock_dir):  # the reference's CPU work: not beside another evaluation's timing
            judge = Judge(spec, conn.send)
        judge.runner = runner
        report = judge.report
        mark("judge", "reference model and inputs made")
        try:  # no solution code has run in it yet: a failure here (the fatbin wall's) is the evaluator's
            prepared = early.receive(spec.timeouts.load_s, "starting the candidate process")
        except CandidateFailure as exc:
            raise RuntimeError(f"preparing the candidate process: {exc}") from exc
        if prepared[0] != "prepared":
            raise CandidateFailure("exception", f"starting the candidate: unexpected reply {prepared[0]!r}")
        early.stop()
        report.confinement = list(prepared[1].get("layers", []))
        report.device = device_info(judge.device, spec.backend)
        report.calibration["heap"] = heap
        report.durations_s["reference"] = round(time.perf_counter() - start, 3)
        mark("judge", "reference ready")
        conn.send(("phase", "loading the solution"))
        cand = judge.calls.start_candidate(early)
        judge.provenance = cpu_provenance(spec, cand)
        mark("judge", "candidate loaded")
        if spec.do_correctness:
            conn.send(("phase", f"checking {spec.num_checks} inputs"))
        with host_work(spec.lock_dir):  # the checks run the solution: not beside another's timing (a CPU host)
            ok = judge.calls.check(cand) if spec.do_correctness else True
        mark("judge", "checks done")
        timed = False
        baseline_conditions: dict[str, Any] = {}
        if ok and spec.do_timing:  # a failed solution costs its build and its checks, never a baseline
            conn.send(("phase", "timing the baselines"))
            baseline_conditions = judge.time_baselines()  # the candidate is stopped meanwhile
            mark("judge", "baselines timed")
            conn.send(("phase", "timing the solution"))
            timed = judge.calls.time_candidate(cand)
            mark("judge", "timing done")
        elif ok and not report.error:  # untimed: the provenance samples its calls all the same
            conn.send(("phase", "sampling the solution"))
            with host_work(spec.lock_dir):
                judge.calls.sample_untimed(cand)
        if ok and not report.error:
            judge.calls.finish_candidate(cand, timed)
        if timed and not report.error:
            early.close()  # nothing of the candidate runs while the baselines are re-timed
            judge.retime_baselines(baseline_conditions)
    except CandidateFailure as exc:
        from kag.core.trust.fatbin_wall import explain
        from kag.core.trust.nvrtc_wall import explain_crash

        report.fail(exc.kind, explain_crash(explain(str(exc)), report.confinement))
    except Exception as exc:  # noqa: BLE001 - the reference or the harness failed, not the candidate
        from kag.core.trust.procs import describe_exception

        report.fail("exception", f"the judge failed (reference model or evaluator): {describe_exception(exc)}",
                    judge_error=True)
    finally:
        runner.close()
        early.close()
        if judge is not None and judge.calls.reader is not None:
            judge.calls.reader.close()
        shutil.rmtree(plan.tmp_dir, ignore_errors=True)
        shutil.rmtree(counter_dir, ignore_errors=True)
        report.candidate_output = capture.close()
        report.durations_s["judge"] = round(time.perf_counter() - start, 3)
        # JSON text, not pickled objects: a torch type left in the report would make the
        # orchestrator import torch (seconds) just to read the verdict
        conn.send(("result", json.dumps(to_dict(report), default=str)))
        mark("judge", "result sent")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the report is sent; skipping interpreter teardown frees the GPU sooner
