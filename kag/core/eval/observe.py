"""What the candidate's calls did, as a profiler running through every one of them saw it.

``CallObserver`` runs in the candidate process (untrusted side). One profiler session is on from
before model_new.py is imported to after the last window, so every call, checked or timed, runs
under the same session, kernel records (CUPTI) included: in back-to-back calls they cost about
1 us a call on an H100 (bench/results/2026-11-26-90fca86-h100), nothing a window can see. It
records the PyTorch operators that ran inside ``ModelNew.forward`` (Kineto's RecordFunction sees
Python and C++ callers alike, on any thread), torch.compile's markers and the GPU kernels, each
attributed to the call that launched it. Across the calls of a window it reports what a solution
that knows it is one of many calls might do: a call's kernels still running when the next call's
start (overlap), one call holding most of a window's GPU time (doing its neighbours' work), calls
that launched nothing.

``Observations`` is plain data; the judge's guard plugins read it (``check_observations``). It is
a report from an untrusted process: a policy signal, not a measurement. Timing and correctness
never depend on it (kag.core.eval.judge_timing, kag.core.eval.compare).
"""

from __future__ import annotations

import bisect
from typing import Any

import attrs

FORWARD_RANGE = "kag::forward"
WINDOW_RANGE = "kag::window"  # the calls of one window
POST_RANGE = "kag::post"  # the hand-over of an output: the harness allocates and fills poison, nothing else
# (and, on the CPU, moving the output into shared memory: copy_, set_)
HARNESS_RANGES = (FORWARD_RANGE, POST_RANGE, WINDOW_RANGE)
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
    error: str | None = None

    def merge(self, other: "Observations") -> None:
        """Add another session's counts (the checks' session, then the timed calls')."""
        self.calls += other.calls
        self.overlapping_calls += other.overlapping_calls
        self.uneven_windows += other.uneven_windows
        self.windows += other.windows
        self.idle_calls += other.idle_calls
        for mine, theirs in ((self.ops, other.ops), (self.kernels, other.kernels), (self.post_ops, other.post_ops)):
            for name, n in theirs.items():
                mine[name] = mine.get(name, 0) + n
        self.compiled += [m for m in other.compiled if m not in self.compiled]
        self.error = self.error or other.error


class CallObserver:
    """A profiler session spanning all of a candidate's calls; ``forward_range`` marks each call."""

    def __init__(self, device: str, kernels: bool = True) -> None:
        self.device = device
        self.kernels = kernels  # record GPU kernels (CUPTI): the checks do, the timed calls do not
        self._prof: Any = None
        self.calls = 0
        self.error: str | None = None

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if self.device.startswith("cuda") and self.kernels:
            activities.append(ProfilerActivity.CUDA)
        try:
            self._prof = profile(activities=activities, experimental_config=all_threads())
            self._prof.__enter__()
        except Exception as exc:  # noqa: BLE001 - the guards report that nothing was observed
            self._prof = None
            self.error = f"the profiler could not start: {type(exc).__name__}: {exc}"

    def forward_range(self, count: bool = True) -> Any:
        """A context marking one call of forward (the ops inside it are the solution's); the
        calibration's null calls go through it too, uncounted."""
        self.calls += int(count)
        return self._range(FORWARD_RANGE)

    def window_range(self) -> Any:
        """A context around the calls of one window."""
        return self._range(WINDOW_RANGE)

    def post_range(self) -> Any:
        """A context marking the hand-over of an output."""
        return self._range(POST_RANGE)

    def _range(self, name: str) -> Any:
        import contextlib

        from torch.autograd.profiler import record_function

        return record_function(name) if self._prof is not None else contextlib.nullcontext()

    def stop(self) -> Observations:
        obs = Observations(calls=self.calls, error=self.error)
        if self._prof is None:
            return obs
        try:
            self._prof.__exit__(None, None, None)
            events = list(self._prof.events())
        except Exception as exc:  # noqa: BLE001
            obs.error = f"the profiler failed: {type(exc).__name__}: {exc}"
            return obs
        finally:
            self._prof = None
        summarize_events(events, obs)
        return obs


def all_threads() -> Any:
    """A profiler config that records every thread, those the solution starts included (Kineto
    records only the thread that started it otherwise); None where torch has no such option."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return _ExperimentalConfig(profile_all_threads=True)
    except (ImportError, TypeError):
        return None


def summarize_events(events: list[Any], obs: Observations) -> None:
    """Fill ``obs`` from profiler events: operators, markers and GPU kernels that start (kernels:
    whose launch starts) inside a forward range (any thread) or on any thread but the harness's (a
    thread the solution started works for it, whenever it runs). The harness's own kernels (the
    poison, a null window's fill) and ModelNew's construction are outside them."""
    import torch

    cuda = torch.autograd.DeviceType.CUDA
    # the harness's thread is the one its ranges are on, whichever ranges a session holds (one
    # with only reference calls or hand-overs in it too)
    marks = [e for e in events if e.name in HARNESS_RANGES and e.device_type != cuda]
    harness = {getattr(e, "thread", None) for e in marks}
    inside = _within([(e.time_range.start, e.time_range.end) for e in marks if e.name == FORWARD_RANGE])
    in_post = _within([(e.time_range.start, e.time_range.end) for e in marks if e.name == POST_RANGE])

    calls_of_windows(events, marks, obs)
    launches = {e.id: e for e in events if e.device_type != cuda}
    for e in events:
        if e.device_type == cuda:
            # the harness's ranges have their own marks on the GPU timeline: annotations, not kernels
            # (a kernel's name cannot be one of them: a demangled name ends in its parameter list)
            if e.name in HARNESS_RANGES or getattr(e, "is_user_annotation", False):
                continue
            launch = launches.get(getattr(e, "linked_correlation_id", 0) or -1)
            if launch is None or getattr(launch, "thread", None) not in harness or inside(launch.time_range.start):
                obs.kernels[e.name] = obs.kernels.get(e.name, 0) + 1
            continue
        name = e.name
        if name in HARNESS_RANGES:
            continue
        if in_post(e.time_range.start) and name.startswith(("aten::", "prim::")) and name not in HARNESS_POST_OPS:
            obs.post_ops[name] = obs.post_ops.get(name, 0) + 1
            continue
        if getattr(e, "thread", None) in harness and not inside(e.time_range.start):
            continue
        if name.startswith(("aten::", "prim::")):
            obs.ops[name] = obs.ops.get(name, 0) + 1
        elif any(marker in name for marker in COMPILED_MARKERS) and name not in obs.compiled:
            obs.compiled.append(name)


def calls_of_windows(events: list[Any], marks: list[Any], obs: Observations) -> None:
    """Attribute each GPU kernel to the call that launched it (its launch's CPU event lies in that
    call's forward range) and fill the cross-call counts of ``obs``."""
    import torch

    cuda = torch.autograd.DeviceType.CUDA
    kernels = [e for e in events if e.device_type == cuda and not (e.name in HARNESS_RANGES
                                                                    or getattr(e, "is_user_annotation", False))]
    if not kernels:
        return
    calls = sorted((e.time_range.start, e.time_range.end) for e in marks if e.name == FORWARD_RANGE)
    windows = sorted((e.time_range.start, e.time_range.end) for e in marks if e.name == WINDOW_RANGE)
    if not calls:
        return
    starts = [a for a, _ in calls]
    launched_at = {e.id: e.time_range.start for e in events if e.device_type != cuda}
    per_call: dict[int, list[tuple[float, float]]] = {}
    for k in kernels:
        t = launched_at.get(getattr(k, "linked_correlation_id", 0) or -1)
        if t is None:
            continue
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and calls[i][0] <= t <= calls[i][1]:
            per_call.setdefault(i, []).append((k.time_range.start, k.time_range.end))
    wstarts = [a for a, _ in windows]
    by_window: dict[int, list[int]] = {}
    for i, (a, _b) in enumerate(calls):
        w = bisect.bisect_right(wstarts, a) - 1
        by_window.setdefault(w, []).append(i)
    for w, members in by_window.items():
        busy = [_union(per_call.get(i, [])) for i in members]
        if any(busy):
            obs.idle_calls += sum(1 for b in busy if b == 0.0)
        for prev, nxt in zip(members, members[1:]):
            if per_call.get(prev) and per_call.get(nxt):
                if min(a for a, _ in per_call[nxt]) < max(b for _, b in per_call[prev]) - OVERLAP_SLACK_US:
                    obs.overlapping_calls += 1
        total = sum(busy)
        if len(members) >= 4 and total > 0:
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
