"""What the candidate's calls did, as a profiler running through every one of them saw it.

``CallObserver`` runs in the candidate process (untrusted side), and in the baseline runner alike.
One profiler session is on from before model_new.py is imported to after the last window, so every
call, checked or timed, runs under the same session. It records the PyTorch operators that ran
inside ``ModelNew.forward`` (Kineto's RecordFunction sees Python and C++ callers alike, on any
thread), torch.compile's markers and the GPU kernels, each attributed to the call that launched it.
On a GPU the profiler's own kernel records (CUPTI through Kineto) are the default; with
``KAG_KERNEL_RECORDER=kag`` they come from kag's recorder (kag.core.eval.candidate.kernel_records)
and the profiler's session records the CPU side only. Across the calls of a window it reports what a solution
that knows it is one of many calls might do: a call's kernels still running when the next call's
start (overlap), one call holding most of a window's GPU time (doing its neighbours' work), calls
that launched nothing.

``Observations`` is plain data; the judge's guard plugins read it (``check_observations``). It is
a report from an untrusted process: a policy signal, not a measurement. Timing and correctness
never depend on it (kag.core.eval.judge.judge_timing, kag.core.eval.judge.compare).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
from typing import Any, Iterator

import attrs

FORWARD_RANGE = "kag::forward"
WINDOW_RANGE = "kag::window"  # the calls of one window
POST_RANGE = "kag::post"  # the hand-over of an output: the harness allocates and fills poison, nothing else
# (and, on the CPU, moving the output into shared memory: copy_, set_)
NULL_RANGE = "kag::null"  # a null window's call: the path of a call, nothing of forward (not a call)
# opened by the harness as its session starts, before any call: the thread of the first one is the
# harness's (a solution thread that opens ranges with the harness's names does not join it)
HARNESS_MARK = "kag::harness"
HARNESS_RANGES = (FORWARD_RANGE, POST_RANGE, WINDOW_RANGE, NULL_RANGE, HARNESS_MARK)
API_CALL = re.compile(r"^cu(da)?[A-Z]")  # a CUDA runtime or driver call (cudaLaunchKernel, cuLaunchKernel, ...)
OVERLAP_SLACK_US = 2.0  # GPU timestamps of two kernels of one stream may touch
UNEVEN_SHARE = 0.5  # one call holding more than this share of its window's GPU time (windows of 4 calls or more)
HARNESS_POST_OPS = frozenset({"aten::empty", "aten::fill_", "aten::empty_strided", "aten::lift_fresh", "aten::copy_",
                              "aten::set_"})
COMPILED_MARKERS = ("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph", "CompiledFxGraph",
                    "TorchDynamo Cache Lookup")


@attrs.define
class Observations:
    """Counts by name over all observed calls; ``error`` when the observer could not run."""

    calls: int = 0
    ops: dict[str, int] = attrs.field(factory=dict)  # aten::/prim:: operators inside forward
    kernels: dict[str, int] = attrs.field(factory=dict)  # GPU kernels launched while observing
    compiled: list[str] = attrs.field(factory=list)  # torch.compile markers inside forward
    replaced: list[str] = attrs.field(factory=list)  # evaluator objects model_new replaced
    post_ops: dict[str, int] = attrs.field(factory=dict)  # operators run while handing an output over
    overlapping_calls: int = 0  # calls whose kernels started before the previous call's had ended
    uneven_windows: int = 0  # windows (of 4+ calls) where one call held most of the GPU time
    windows: int = 0  # windows of 4+ calls with kernels seen
    idle_calls: int = 0  # calls that launched no kernel while others of their window did
    thread_launches: int = 0  # kernels launched by a thread other than the one that calls forward
    recorder: str = ""  # who recorded the kernels: "kag" (kernel_records), "profiler", "" (none: a CPU)
    error: str | None = None

    def merge(self, other: "Observations") -> None:
        """Add another session's counts (the checks' session, then the timed calls')."""
        self.calls += other.calls
        self.overlapping_calls += other.overlapping_calls
        self.uneven_windows += other.uneven_windows
        self.windows += other.windows
        self.idle_calls += other.idle_calls
        self.thread_launches += other.thread_launches
        for mine, theirs in ((self.ops, other.ops), (self.kernels, other.kernels), (self.post_ops, other.post_ops)):
            for name, n in theirs.items():
                mine[name] = mine.get(name, 0) + n
        self.compiled += [m for m in other.compiled if m not in self.compiled]
        parts = set(self.recorder.split(",")) | set(other.recorder.split(","))
        self.recorder = ",".join(sorted(p for p in parts if p))
        self.error = self.error or other.error


class CallObserver:
    """A profiler session spanning all of a candidate's calls; ``forward_range`` marks each call."""

    def __init__(self, device: str, kernels: bool = True) -> None:
        self.device = device
        self.kernels = kernels  # record GPU kernels (kag's CUPTI recorder, else the profiler's)
        self._prof: Any = None
        self.calls = 0
        self.error: str | None = None
        self._range_type: Any = _range_class()  # resolved once: it is entered on every call
        self.recorder: Any = None  # kag.core.eval.candidate.kernel_records.KernelRecorder, on a GPU
        self.windows = 0
        self.call_window: list[int] = []  # the window of each call (the recorder's ids are 1, 2, ...)

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if self.device.startswith("cuda") and self.kernels:
            from kag.core.eval.candidate.kernel_records import KernelRecorder

            # KAG_KERNEL_RECORDER=kag: kag's own recorder beside a CPU-only session (not the default: what
            # it buys through the judge is not measured yet; see kernel_records)
            self.recorder = KernelRecorder.open() if os.environ.get("KAG_KERNEL_RECORDER") == "kag" else None
            if self.recorder is None:  # the default (or no CUPTI of torch's to drive): the profiler records them
                activities.append(ProfilerActivity.CUDA)
        try:
            self._prof = profile(activities=activities, experimental_config=all_threads())
            with quiet_stderr():
                self._prof.__enter__()
            python_markers(False)
            with self._range_type(HARNESS_MARK):
                pass
        except Exception as exc:  # noqa: BLE001 - the guards report that nothing was observed
            self._prof = self.recorder = None
            self.error = f"the profiler could not start: {type(exc).__name__}: {exc}"
            return
        if self.recorder is not None:
            failed = self.recorder.start()
            if failed:
                self.recorder = None
                self.error = f"the kernel recorder could not start: {failed}"
                return
            import torch

            from kag.core.eval.candidate.kernel_records import MARK

            self.recorder.push(MARK)  # a launch of the harness's own: which thread is the harness's
            torch.zeros(1, device=self.device)
            self.recorder.pop()

    def forward_range(self) -> Any:
        """A context marking one call of forward (the ops inside it are the solution's); the kernel
        recorder's id for the call is pushed until ``call_returned``."""
        self.calls += 1
        if self.recorder is not None:
            self.call_window.append(self.windows)
            self.recorder.push(self.calls)
        return self._range(FORWARD_RANGE)

    def call_returned(self) -> None:
        if self.recorder is not None:
            self.recorder.pop()

    def null_range(self) -> Any:
        """A context as costly as ``forward_range``, around a null window's call (nothing in it):
        not a call of forward, so not counted among a window's calls."""
        return self._range(NULL_RANGE)

    def window_range(self) -> Any:
        """A context around the calls of one window."""
        self.windows += 1
        return self._range(WINDOW_RANGE)

    def post_range(self) -> Any:
        """A context marking the hand-over of an output."""
        return self._range(POST_RANGE)

    def _range(self, name: str) -> Any:
        if self._prof is None:
            import contextlib

            return contextlib.nullcontext()
        return self._range_type(name)

    def stop(self) -> Observations:
        obs = Observations(calls=self.calls, error=self.error)
        if self.device.startswith("cuda") and self.kernels:
            obs.recorder = "kag" if self.recorder is not None else "profiler"
        records = None
        if self.recorder is not None:
            try:
                records = self.recorder.stop()
            except Exception as exc:  # noqa: BLE001
                obs.error = f"the kernel recorder failed: {type(exc).__name__}: {exc}"
            self.recorder = None
        if self._prof is None:
            return obs
        try:
            python_markers(True)
            with quiet_stderr():
                self._prof.__exit__(None, None, None)
            events = raw_events(self._prof)
        except Exception as exc:  # noqa: BLE001
            obs.error = f"the profiler failed: {type(exc).__name__}: {exc}"
            return obs
        finally:
            self._prof = None
        summarize_events(events, obs)
        if records is not None:
            from kag.core.eval.candidate.kernel_records import summarize_records

            summarize_records(records, self.call_window, obs)
        return obs


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Kineto (torch >= 2.12) writes a ``USDT: ... profiler_start`` / ``profiler_stop`` line to
    stderr whenever a profiler session starts or stops, whatever ``KINETO_LOG_LEVEL`` says: the
    baseline runner's sessions printed 24 such lines into ``kag run``'s output. Only a session's start
    and stop run under this, so a real error in between still shows. Where the process may not open
    ``/dev/null`` (a confinement's file rules), stderr is left as it is: noise, never a failed session."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        os.close(saved)
        yield
        return
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _range_class() -> Any:
    """The profiler range a call is marked with: the C one where torch has it (0.6 us a call, where
    ``record_function``'s Python ops took 15 us on an H100 host, longer than a 13 us kernel), both
    a user-scope RecordFunction in Kineto's records."""
    import torch

    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    if fast is not None:
        return fast
    from torch.autograd.profiler import record_function

    return record_function


def python_markers(on: bool) -> None:
    """Switch the records torch's Python code adds only while a profiler watches (it reads
    ``torch.autograd.profiler._is_profiler_enabled``): torch.compile's graph markers and a record per
    Triton launch, which also moves each launch off inductor's fast launcher. Under the observer they
    cost a compiled ~50 us task ~55 us a call on an H100/H200 host (its baseline read 0.12 ms where it
    runs in 0.057-0.070 ms unobserved: bench/results/2026-11-27-compile-baseline/). Off on both sides
    (the candidate's and the baseline runner's observer are this class), so neither pays the
    observation; the C-level records stay: every aten operator, the kernels, and torch.compile's own
    region and cache-lookup markers, which the no-torch-fallback guard reads. A candidate could
    switch the flag itself; nothing the judge decides depends on it."""
    import torch.autograd.profiler as autograd_profiler

    autograd_profiler._is_profiler_enabled = on


def all_threads() -> Any:
    """A profiler config that records every thread, those the solution starts included (Kineto
    records only the thread that started it otherwise); None where torch has no such option."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return _ExperimentalConfig(profile_all_threads=True)
    except (ImportError, TypeError):
        return None


@attrs.frozen
class Event:
    """One of Kineto's raw events, as the summary needs it (nanoseconds). A kernel and the runtime
    call that launched it share ``corr``; both link (``linked``) to the operator or range that was
    open on the launching thread. Read from Kineto's own records rather than torch's
    FunctionEvents, which do not carry the link on every torch version (2.11 has none) and cost
    seconds to build for a timing's 10^5 events."""

    name: str
    cuda: bool
    start: int
    end: int
    thread: int
    corr: int
    linked: int
    annotation: bool


def raw_events(prof: Any) -> list[Event]:
    import torch

    cuda = torch.autograd.DeviceType.CUDA
    out = []
    for e in prof.profiler.kineto_results.events():
        annotation = getattr(e, "is_user_annotation", None)
        out.append(Event(name=e.name(), cuda=e.device_type() == cuda, start=int(e.start_ns()),
                         end=int(e.start_ns() + e.duration_ns()), thread=int(e.start_thread_id()),
                         corr=int(e.correlation_id()), linked=int(e.linked_correlation_id()),
                         annotation=bool(annotation()) if callable(annotation) else False))
    return out


def summarize_events(events: list[Event], obs: Observations) -> None:
    """Fill ``obs`` from profiler events: operators, markers and GPU kernels that start (kernels:
    whose launch starts) inside a forward range (any thread) or on any thread but the harness's (a
    thread the solution started works for it, whenever it runs). The harness's own kernels (the
    poison, a null window's fill) and ModelNew's construction are outside them."""
    # the harness's thread is the one that opened the session's first mark; its ranges are the
    # harness's, and each call of forward it made must be among them: fewer means the profiler was
    # blinded (RecordFunction's callbacks cleared from C++), and then nothing here can be trusted
    first = min((e for e in events if e.name == HARNESS_MARK and not e.cuda), key=lambda e: e.start, default=None)
    harness = {first.thread} if first is not None else set()
    marks = [e for e in events if e.name in HARNESS_RANGES and not e.cuda and e.thread in harness]
    seen = sum(1 for e in marks if e.name == FORWARD_RANGE)
    if seen < obs.calls:
        obs.error = obs.error or (f"the profiler saw {seen} of the {obs.calls} calls of forward (its callbacks "
                                  "were removed or switched off)")
    inside = _within([(e.start, e.end) for e in marks if e.name == FORWARD_RANGE])
    in_post = _within([(e.start, e.end) for e in marks if e.name == POST_RANGE])
    in_window = _within([(e.start, e.end) for e in marks if e.name == WINDOW_RANGE])
    launch_of = launches(events)
    calls_of_windows(events, marks, obs, launch_of)
    for e in events:
        if e.cuda:
            # the harness's ranges have their own marks on the GPU timeline: annotations, not kernels
            # (a kernel's name cannot be one of them: a demangled name ends in its parameter list)
            if e.name in HARNESS_RANGES or e.annotation:
                continue
            launch = launch_of(e)
            if launch is None or launch.thread not in harness or inside(launch.start):
                obs.kernels[e.name] = obs.kernels.get(e.name, 0) + 1
            if harness and launch is not None and (launch.thread not in harness
                                                   or (launch.linked == 0 and in_window(launch.start))):
                # launched by a thread of the solution's, so no call is charged with it (tests/adversarial
                # overlap_threads escaped this way on an H100). Kineto gives a thread that never opened a
                # range the harness's thread id, but its launches link to nothing, and during a window the
                # harness's thread always has a range open (bench/results/2026-11-26-63829ef-h100-h200)
                obs.thread_launches += 1
            continue
        name = e.name
        if name in HARNESS_RANGES:
            continue
        if in_post(e.start) and name.startswith(("aten::", "prim::")) and name not in HARNESS_POST_OPS:
            obs.post_ops[name] = obs.post_ops.get(name, 0) + 1
            continue
        if e.thread in harness and not inside(e.start):
            continue
        if name.startswith(("aten::", "prim::")):
            obs.ops[name] = obs.ops.get(name, 0) + 1
        elif any(marker in name for marker in COMPILED_MARKERS) and name not in obs.compiled:
            obs.compiled.append(name)


def launches(events: list[Event]) -> Any:
    """A function from a kernel to the CPU event that launched it: the runtime call with its
    correlation id, else the operator or range it links to; None when neither was recorded. A
    runtime call made with no operator or range open on its thread (a thread the solution started)
    links to nothing: it is known by its name."""
    runtime = {e.corr: e for e in events if not e.cuda and (e.linked > 0 or API_CALL.match(e.name))}
    frontend = {e.corr: e for e in events if not e.cuda and e.linked == 0 and not API_CALL.match(e.name)}

    def launch_of(kernel: Event) -> Event | None:
        return runtime.get(kernel.corr) or (frontend.get(kernel.linked) if kernel.linked > 0 else None)

    return launch_of


def calls_of_windows(events: list[Event], marks: list[Event], obs: Observations, launch_of: Any) -> None:
    """Attribute each GPU kernel to the call that launched it (its launch lies in that call's
    forward range) and fill the cross-call counts of ``obs``."""
    kernels = [e for e in events if e.cuda and not (e.name in HARNESS_RANGES or e.annotation)]
    if not kernels:
        return
    calls = sorted((e.start, e.end) for e in marks if e.name == FORWARD_RANGE)
    windows = sorted((e.start, e.end) for e in marks if e.name == WINDOW_RANGE)
    if not calls:
        return
    starts = [a for a, _ in calls]
    per_call: dict[int, list[tuple[float, float]]] = {}
    for k in kernels:
        launch = launch_of(k)
        if launch is None:
            continue
        i = bisect.bisect_right(starts, launch.start) - 1
        if i >= 0 and calls[i][0] <= launch.start <= calls[i][1]:
            per_call.setdefault(i, []).append((k.start, k.end))
    wstarts = [a for a, _ in windows]
    by_window: dict[int, list[int]] = {}
    for i, (a, _b) in enumerate(calls):
        w = bisect.bisect_right(wstarts, a) - 1
        by_window.setdefault(w, []).append(i)
    count_windows([[per_call.get(i, []) for i in members] for members in by_window.values()], obs)


def count_windows(windows: list[list[list[tuple[float, float]]]], obs: Observations) -> None:
    """The cross-call counts of ``obs`` from each window's calls, in order, each as the (start, end)
    of its kernels on the GPU (ns): calls that launched nothing while others did, a call's kernels
    starting before the previous call's ended, one call holding most of a window's GPU time."""
    slack = OVERLAP_SLACK_US * 1000.0
    for calls in windows:
        busy = [_union(spans) for spans in calls]
        if any(busy):
            obs.idle_calls += sum(1 for b in busy if b == 0.0)
        for prev, nxt in zip(calls, calls[1:]):
            if prev and nxt and min(a for a, _ in nxt) < max(b for _, b in prev) - slack:
                obs.overlapping_calls += 1
        total = sum(busy)
        if len(calls) >= 4 and total > 0:
            obs.windows += 1
            if max(busy) > UNEVEN_SHARE * total:
                obs.uneven_windows += 1


def _union(spans: list[tuple[float, float]]) -> float:
    """The length of the union of intervals (a call's GPU busy time, its streams overlapping)."""
    total, end = 0.0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _within(spans: list[tuple[float, float]]) -> Any:
    """A test of whether a time falls inside one of ``spans``. They are merged first: a range the
    solution opens inside a call's (a record_function named like the harness's) must not hide
    what follows it in that call."""
    merged: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    spans = merged
    starts = [a for a, _ in spans]

    def test(t: float) -> bool:
        i = bisect.bisect_right(starts, t) - 1
        return i >= 0 and spans[i][0] <= t <= spans[i][1]

    return test
