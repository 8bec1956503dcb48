"""Timing the judge owns: the candidate's speed from the judge's clock, never from the candidate.

Trusted side. Each timed call is a window on the judge's ``perf_counter``: the judge refills the
inputs and flushes the cache while the candidate is stopped, resumes it, rings, waits for its
answer and, on a GPU, for a probe kernel of its own to find the GPU idle (time slicing makes the
probe wait while another context still has work), then stops it again (kag.core.eval.candidate_process).
No code in the candidate process can shorten a window: returning early only moves its work into
the probe's wait, and work deferred past that cannot run, because the process is stopped.

Calibration: before model_new.py exists in the candidate, the judge times the same path with
nothing to run (``null``) and the output hand-over (``post``) with outputs shaped like the
reference's. On a GPU a null call launches one harness kernel: any call that leaves an output
on the GPU makes the GPU switch from the judge's context to the candidate's and back, and that
switch (about 0.4 ms on an H100) belongs to the path. With ``reference_calibration`` the judge
also times the task's own Model through the path, and subtracts what the path adds to it beyond
eager in the judge's process (it grows with the task's memory footprint) instead of the null
path's cost. A call's time is its window minus the path's cost; work done when an output
is asked for (``post`` slower than calibrated) is added to every call, since the candidate cannot
know which outputs will be asked for. No call is credited below the path's resolution (a quarter of
the null call: the path drifts between its calibration and the timed calls). Baselines are timed the same way in the judge's own process
(wall clock around call + synchronise, minus a null call). The candidate's own clock is kept only
as a cross-check: a report far faster than the judge's is a violation.

Skipped work: the outputs of ``RECHECKED`` timed calls chosen in secret are compared as they
happen (the judge asks for an output only after its call ended), and a timing distribution with a
cluster of calls far faster than the median (work done on some calls only) is a violation.
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from typing import Any, Callable

import attrs

from kag.core.eval.timing import summarize  # noqa: F401 - part of this module's interface


RECHECKED = 12  # a solution working on 2 of 3 timed calls is caught with probability 1 - (2/3)**12 = 99.2%
NULL_CALLS = 200
REFERENCE_WARMUP, REFERENCE_CALLS = 3, 12  # the task's Model through the candidate's path (GPU)
POST_CALIBRATIONS = 12  # hand-overs of a ready output before the solution is imported: its noise, unforgeable
FOLD_SIGMAS = 3.0  # a timed call's hand-overs slower than calibrated by this many standard errors of the
# difference of medians (from the calibration's spread alone: the solution can widen its own) are work put
# off until the output was asked for, and the whole difference is charged to every timed call. A slack that
# grew with the hand-over's own time (10% of it, once) let a lazy ReLU on a 128 MB output hide its 85 us
# kernel in a 1 ms hand-over: 3.25x eager and reward 3 on an H100 (bench/trust_gpu/session5)
FOLD_FLOOR_S = 5e-6
FAST_RATIO = 0.5  # a "skipped" call: under half the median
FAST_MIN_GAP_S = 20e-6  # ... and this much under it (tiny kernels jitter)
FAST_MIN_SHARE = 0.2  # a cluster: at least this share of the timed calls (and 3 calls). The verdict is the
# median: fast calls on a share p < 1/2 only move it to the honest calls' (1/2 - p) / (1 - p) quantile (the
# 37.5th at p = 0.2, within their own spread), and p >= 1/2 is what RECHECKED catches (1 - 2**-12). Lower, it
# flagged honest ~0.1 ms kernels on a shared H100 (5 of 100 calls at 0.042 ms where checked calls took 0.103)
RESOLUTION_SHARE = 0.25  # no call is credited as faster than this share of the path's own cost (the null
# call's window): the path drifts between its calibration and the timed calls. On an H100 (path ~0.4 ms) an
# honest 14 us ReLU measured 0 to 0.14 ms over 8 evaluations, and one of them, at 0.0005 ms, got 29x eager and
# reward 3 (bench/issue19_h100). Only calls within that of the path are floored: a 1 ms eager task still
# shows a 10x kernel as 10x on that GPU
CROSS_CHECK_RATIO = 0.1  # its own median under a tenth of the judge's (less 50 us) is a lie: honest calls on a
# loaded machine wait to be scheduled (the judge's window includes it, its own clock does not)
PROBE_IDLE_FACTOR = 3.0


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def mad(xs: list[float]) -> float:
    """Median absolute deviation (a spread robust to the odd outlier)."""
    if len(xs) < 2:
        return 0.0
    m = statistics.median(xs)
    return statistics.median(abs(x - m) for x in xs)


class GpuProbe:
    """A one-element kernel in the judge's context: how long it takes tells whether another
    context (the candidate's) still has work on the GPU."""

    def __init__(self, device: str, failure: Callable[[str, str], Exception]) -> None:
        import torch

        self.torch = torch
        self.sync = torch.cuda.synchronize
        self.x = torch.zeros(1, device=device)
        self.failure = failure
        lat = [self.once() for _ in range(60)][10:]
        self.idle_s = median(lat)
        self.threshold_s = max(PROBE_IDLE_FACTOR * self.idle_s, self.idle_s + 40e-6)
        self.waits = 0  # probes that found the GPU busy

    def once(self) -> float:
        t0 = time.perf_counter()
        self.x.add_(1)
        self.sync()
        return time.perf_counter() - t0

    def __call__(self, timeout_s: float) -> None:
        self.sync()
        deadline = time.perf_counter() + timeout_s
        while self.once() > self.threshold_s:
            self.waits += 1
            if time.perf_counter() > deadline:
                raise self.failure("timeout", f"GPU work the candidate left running did not finish within "
                                              f"{timeout_s:g} s of its call returning")


@attrs.define
class PathCalibration:
    """Windows of the candidate's path with no solution code in it (seconds)."""

    null_s: list[float] = attrs.field(factory=list)
    post_s: list[float] = attrs.field(factory=list)
    probe_waits: int = 0  # slow probes after the null calls (the GPU switching back to the judge)
    reference_s: list[float] = attrs.field(factory=list)  # the task's Model through the path (GPU)
    eager_s: float | None = None  # ... and in the judge's own process

    @property
    def null_overhead_s(self) -> float:
        return median(self.null_s)

    @property
    def overhead_s(self) -> float:
        """What the path adds to a call: on a GPU, the reference's windows beyond its in-process
        time (it depends on the task's memory footprint); else the null path."""
        if self.reference_s and self.eager_s is not None:
            return max(median(self.reference_s) - self.eager_s, 0.0)
        return self.null_overhead_s


@attrs.define
class CandidateTiming:
    """What the judge measured of the candidate: per-call windows, output hand-overs, and which
    calls' outputs were compared and found right (indices into ``windows_s``)."""

    windows_s: list[float] = attrs.field(factory=list)
    post_s: list[float] = attrs.field(factory=list)
    verified: list[int] = attrs.field(factory=list)

    def estimates_s(self, cal: PathCalibration, with_fold: bool = True) -> tuple[list[float], float]:
        """Per-call times (window less the null path, plus the work done at hand-over), and that
        hand-over work (the fold). ``with_fold=False``: the windows alone (the checks' hand-overs run
        under the profiler's kernel records, slower than calibrated for honest solutions too)."""
        fold = 0.0
        threshold = self.fold_threshold_s(cal) if with_fold else None
        if threshold is not None:
            diff = median(self.post_s) - median(cal.post_s)
            if diff > threshold:
                fold = diff
        overhead = cal.overhead_s
        return [max(w - overhead, 0.0) + fold for w in self.windows_s], fold

    def fold_threshold_s(self, cal: PathCalibration) -> float | None:
        """How much slower than calibrated these hand-overs may be before it counts as work; None
        without hand-overs on both sides."""
        return fold_threshold_s(cal.post_s, len(self.post_s)) if self.post_s and cal.post_s else None


def resolution_s(cal: PathCalibration) -> float:
    """The shortest call time the judge credits: RESOLUTION_SHARE of the null path's window."""
    return RESOLUTION_SHARE * cal.null_overhead_s


def fold_threshold_s(calibrated_s: list[float], n: int) -> float:
    """How much slower than calibrated ``n`` hand-overs may be before the difference counts as
    work: FOLD_SIGMAS standard errors of a difference of two medians (1.4826 MAD estimates the
    spread, 1.2533 / sqrt(n) a median's error), at least FOLD_FLOOR_S."""
    sigma = 1.4826 * mad(calibrated_s)
    error = 1.2533 * sigma * math.sqrt(1.0 / max(n, 1) + 1.0 / max(len(calibrated_s), 1))
    return max(FOLD_FLOOR_S, FOLD_SIGMAS * error)


def skipped_work(estimates_s: list[float], verified_s: list[float]) -> str | None:
    """Why the distribution looks like work done on some calls only, or None.

    ``verified_s`` are the times of calls whose outputs the judge compared and found right (the
    checks and the rechecked timed calls): each did the whole work, so the fastest of them bounds
    an honest call from below (load only ever slows a call down). A cluster of calls far under it
    did not do the work."""
    if len(estimates_s) < 10 or not verified_s:
        return None
    floor = min(verified_s)
    fast = [e for e in estimates_s if e < FAST_RATIO * floor and floor - e > FAST_MIN_GAP_S]
    if len(fast) >= max(3, math.ceil(FAST_MIN_SHARE * len(estimates_s))):
        return (f"{len(fast)} of {len(estimates_s)} timed calls took under {FAST_RATIO:.0%} of the fastest call whose "
                f"output was checked ({median(fast) * 1e3:.4g} ms vs {floor * 1e3:.4g} ms): the work is done on "
                f"some calls only")
    return None


def cross_check(own_ms: list[float], judge_median_ms: float) -> str | None:
    """A violation when the candidate's own clock reports calls far faster than the judge saw."""
    if not own_ms:
        return None
    own = median(own_ms)
    if own < CROSS_CHECK_RATIO * judge_median_ms - 0.05:
        return (f"the candidate's own timer reports {own:.4g} ms per call where the judge measured "
                f"{judge_median_ms:.4g} ms: its clock was tampered with")
    return None


def choose_rechecked(iters: int, enabled: bool) -> set[int]:
    """The timed calls whose outputs are compared, chosen in secret."""
    if not enabled or iters <= 0:
        return set()
    return set(secrets.SystemRandom().sample(range(iters), min(RECHECKED, iters)))


def time_in_process(run: Callable[[], Any], refill: Callable[[int], None], flush: Callable[[], None],
                    sync: Callable[[], None], *, warmup: int, iters: int) -> list[float]:
    """The judge's own timing of a baseline: per call, the wall clock around run + synchronise,
    less a null call's (the same quantity the candidate's windows give after calibration).
    Returns milliseconds."""
    nulls = []
    for _ in range(50):
        t0 = time.perf_counter()
        sync()
        nulls.append(time.perf_counter() - t0)
    overhead = median(nulls[10:])
    times = []
    for k in range(warmup + iters):
        refill(k)
        flush()
        sync()
        t0 = time.perf_counter()
        out = run()
        sync()
        t1 = time.perf_counter()
        del out
        if k >= warmup:
            times.append(max(t1 - t0 - overhead, 0.0) * 1000.0)
    return times
