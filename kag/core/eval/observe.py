"""What the candidate's calls did, as a profiler running through every one of them saw it.

``CallObserver`` runs in the candidate process (untrusted side). A profiler session is on from
before the candidate's path is calibrated to after its last timed call, so every call, checked or
timed, runs with the profiler enabled and a solution cannot tell a watched call from another. It
records the PyTorch operators that ran inside ``ModelNew.forward`` (Kineto's RecordFunction sees
Python and C++ callers alike, on any thread), torch.compile's markers and, during the correctness
checks, the GPU kernels launched (CUPTI). CUPTI's kernel records cost the calls about half a
millisecond each on the H100, so timed calls run under a session without them; which activities a
session records is not visible from Python (``_profiler_enabled()`` is true in both), only from
C++ into Kineto's internals.

``Observations`` is plain data; the judge's guard plugins read it (``check_observations``). It is
a report from an untrusted process: a policy signal, not a measurement. Timing and correctness
never depend on it (kag.core.eval.judge_timing, kag.core.eval.compare).
"""

from __future__ import annotations

import bisect
from typing import Any

import attrs

FORWARD_RANGE = "kag::forward"
REFERENCE_RANGE = "kag::reference"  # a call of the task's Model (path calibration): the harness's, not forward's
POST_RANGE = "kag::post"  # the hand-over of an output: the harness allocates and fills poison, nothing else
# (and, on the CPU, moving the output into shared memory: copy_, set_)
HARNESS_RANGES = (FORWARD_RANGE, REFERENCE_RANGE, POST_RANGE)
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
    error: str | None = None

    def merge(self, other: "Observations") -> None:
        """Add another session's counts (the checks' session, then the timed calls')."""
        self.calls += other.calls
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

    def reference_range(self) -> Any:
        """A context marking a call of the reference (before model_new.py exists): the same cost as
        ``forward_range``, but its operators are the harness's (outside every forward range)."""
        return self._range(REFERENCE_RANGE)

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
    """Fill ``obs`` from profiler events: operators and markers that start inside a forward range
    (any thread) or on any thread but the harness's (a thread the solution started works for it,
    whenever it runs), and every GPU kernel."""
    import torch

    cuda = torch.autograd.DeviceType.CUDA
    # the harness's thread is the one its ranges are on, whichever ranges a session holds (one
    # with only reference calls or hand-overs in it too)
    marks = [e for e in events if e.name in HARNESS_RANGES and e.device_type != cuda]
    harness = {getattr(e, "thread", None) for e in marks}
    inside = _within([(e.time_range.start, e.time_range.end) for e in marks if e.name == FORWARD_RANGE])
    in_post = _within([(e.time_range.start, e.time_range.end) for e in marks if e.name == POST_RANGE])

    for e in events:
        if e.device_type == cuda:
            # the harness's ranges have their own marks on the GPU timeline: annotations, not kernels
            # (a kernel's name cannot be one of them: a demangled name ends in its parameter list)
            if not (e.name in HARNESS_RANGES or getattr(e, "is_user_annotation", False)):
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
