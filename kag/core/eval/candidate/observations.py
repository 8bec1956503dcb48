"""What the observer reports of a candidate's calls: ``Observations`` and the names both ways of observing
share (untrusted side: filled in the candidate and in the baseline runner, read by the judge's guards).

Plain data and pure functions, imported by the observer (kag.core.eval.candidate.observe), torch.profiler's
summary (kag.core.eval.candidate.profiler_events) and kag's kernel recorder
(kag.core.eval.candidate.kernel_records) alike.
"""

from __future__ import annotations

import re

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
    operators: str = ""  # who counted the operators: "counter" (op_counter), "profiler", "" (nothing ran)
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
        for field in ("recorder", "operators"):
            parts = set(getattr(self, field).split(",")) | set(getattr(other, field).split(","))
            setattr(self, field, ",".join(sorted(p for p in parts if p)))
        self.error = self.error or other.error


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
