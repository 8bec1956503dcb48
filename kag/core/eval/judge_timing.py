"""Timing the judge owns: every speed from the judge's clock, through one path for both sides.

Trusted side. A timing is a series of *windows* on the judge's ``perf_counter``. Before a window
the judge fills the child's staged input sets with fresh inputs and flushes the cache while the
child is stopped; then it resumes the child, rings for ``k`` calls back to back (call ``j`` on set
``j``), waits for the answer and, on a GPU, for a probe kernel of its own to find the GPU idle,
and stops the child again (kag.core.eval.candidate_process). Nothing in the child can shorten a
window: returning early only moves its work into the probe's wait, and work put off past that
cannot run, because the process is stopped.

Both sides go through this one path. The candidate is one child of the judge; eager and
torch.compile run in another, the baseline runner (same harness, same doorbell, same windows, same
staging and flush; unconfined, since it runs only the task's own code). A window's fixed cost (the
resume, the doorbell, the GPU switching from the judge's context to the child's and back, the stop)
is measured by *null windows* (the same path, one fill kernel, nothing of forward) interleaved at
random with the timed ones, so the cost drifts with them and cancels: a call's time is
``(window - median null window) / k``. ``k`` is chosen per side so that a window holds about
``WINDOW_TARGET_S`` of work (within a memory budget for the staged inputs): the path's noise,
about 0.1 ms on an H100, is then a percent of a window, not several times a 20 us kernel.

What a window cannot see, and what covers it:
- Skipped work: outputs of calls chosen independently with a secret probability are compared after
  their window (kag.core.eval.judge_calls); every call is a candidate for it, warm-up and checks too.
- Work put off until an output is handed over (GPU): hand-overs slower than the calibrated ones
  (``fold_threshold_s``) are charged to every call.
- Calls of one window that overlap on the GPU, or one call doing the work of later ones (a batch
  that knows it is one): per-call kernel records (kag.core.eval.observe) show them; and on a GPU
  *single-call windows*, interleaved, give the latency of one call, which cannot overlap anything:
  no call is credited faster than half of that (``floor_s``). Honest code never meets the floor
  (a pipelined call takes at least the larger of its CPU and GPU time, a lone call their sum).
- A cluster of windows far faster than the windows whose outputs were verified is a violation
  (``skipped_work``); the candidate's own clock is a cross-check only (``cross_check``).
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from typing import Any, Callable

import attrs

from kag.core.eval.timing import summarize  # noqa: F401 - part of this module's interface

WINDOW_TARGET_S = 0.005  # a GPU window holds about this much work (CPU windows hold one call: they are ms)
MAX_CALLS = 512  # calls in one window
INPUT_BUDGET_BYTES = 8 << 30  # staged inputs and kept outputs of one window, at most (and a quarter of free memory)
NULL_SHARE = 1 / 3  # null windows per timed window (at least MIN_NULL)
MIN_NULL = 10
SINGLE_WINDOWS = 16  # single-call windows, where a window holds more calls (the latency floor)
FLOOR_SHARE = 0.5  # no call is credited under this share of a single call's latency (less its error)
SAMPLED_WINDOWS = {"cpu": 48, "cuda": 16}  # windows like the timed ones whose CPU time the judge samples
# (provenance), not timed: a CPU call of a millisecond holds one or two samples, a GPU window several
RECHECK_EXPECTED = (12, 24)  # the expected number of compared calls, drawn per evaluation: with 12, a
# solution skipping work on one call in three is caught with probability 1 - (2/3)**12 = 99.2%
POST_CALIBRATIONS = 12  # hand-overs of a ready output before the solution is imported: its noise, unforgeable
FOLD_SIGMAS = 3.0  # a timed call's hand-overs slower than calibrated by this many standard errors of the
# difference of medians (from the calibration's spread alone: the solution can widen its own) are work put
# off until the output was asked for, and the whole difference is charged to every timed call. A slack that
# grew with the hand-over's own time (10% of it, once) let a lazy ReLU on a 128 MB output hide its 85 us
# kernel in a 1 ms hand-over: 3.25x eager and reward 3 on an H100 (bench/trust_gpu/session5)
FOLD_FLOOR_S = 5e-6
FAST_RATIO = 0.5  # a "skipped" window: its calls under half the fastest verified window's
FAST_MIN_GAP_S = 20e-6  # ... and this much under it (tiny kernels jitter)
FAST_MIN_SHARE = 0.2  # a cluster: at least this share of the timed windows (and 3 of them)
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


def median_error(xs: list[float]) -> float:
    """The standard error of the median of ``xs`` (1.4826 MAD estimates sigma; 1.2533 / sqrt(n))."""
    return 1.2533 * 1.4826 * mad(xs) / math.sqrt(len(xs)) if xs else 0.0


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


def choose_calls(per_call_s: float, bytes_per_call: int, budget_bytes: int, gpu: bool) -> int:
    """How many calls a window holds: enough for ``WINDOW_TARGET_S`` of work on a GPU (one on the
    CPU, where calls take milliseconds), no more than the staged inputs and kept outputs fit in
    ``budget_bytes``, at most ``MAX_CALLS``."""
    if not gpu:
        return 1
    want = math.ceil(WINDOW_TARGET_S / max(per_call_s, 1e-7))
    fit = budget_bytes // max(bytes_per_call, 1)
    return int(max(1, min(want, fit, MAX_CALLS)))


@attrs.define
class PostCalibration:
    """Hand-overs of a ready output, timed before the solution was imported (seconds)."""

    post_s: list[float] = attrs.field(factory=list)


@attrs.define
class WindowTiming:
    """What the judge measured of one side: its windows (seconds), by kind, and which timed
    windows' compared outputs were right (indices into ``timed_s``)."""

    calls: int = 1
    timed_s: list[float] = attrs.field(factory=list)
    null_s: list[float] = attrs.field(factory=list)
    single_s: list[float] = attrs.field(factory=list)
    post_s: list[float] = attrs.field(factory=list)
    verified: list[int] = attrs.field(factory=list)
    failed: bool = False  # a compared output was wrong: the timing stopped there

    @property
    def path_s(self) -> float:
        """The fixed cost of a window: the median null window."""
        return median(self.null_s)

    def per_call_s(self, fold_s: float = 0.0) -> list[float]:
        """Each timed window's time per call: (window - null) / calls, plus the hand-over fold."""
        path = self.path_s
        return [max(w - path, 0.0) / self.calls + fold_s for w in self.timed_s]

    def resolution_s(self) -> float:
        """What the path's own noise is worth per call: one standard deviation of a null window,
        spread over a window's calls."""
        return 1.4826 * mad(self.null_s) / self.calls

    def floor_s(self) -> float | None:
        """The least a call of a many-call window may be credited: ``FLOOR_SHARE`` of a lone call's
        latency, less three standard errors of it; None where windows hold one call."""
        if self.calls <= 1 or len(self.single_s) < 5 or not self.null_s:
            return None
        lone = median(self.single_s) - self.path_s
        error = math.hypot(median_error(self.single_s), median_error(self.null_s))
        return max(0.0, FLOOR_SHARE * (lone - 3.0 * error))

    def fold_s(self, cal: PostCalibration) -> float:
        """Hand-over work: how much slower than calibrated the hand-overs were, when that is more
        than noise (else 0)."""
        if not self.post_s or not cal.post_s:
            return 0.0
        diff = median(self.post_s) - median(cal.post_s)
        return diff if diff > fold_threshold_s(cal.post_s, len(self.post_s)) else 0.0


def fold_threshold_s(calibrated_s: list[float], n: int) -> float:
    """How much slower than calibrated ``n`` hand-overs may be before the difference counts as
    work: FOLD_SIGMAS standard errors of a difference of two medians (1.4826 MAD estimates the
    spread, 1.2533 / sqrt(n) a median's error), at least FOLD_FLOOR_S."""
    sigma = 1.4826 * mad(calibrated_s)
    error = 1.2533 * sigma * math.sqrt(1.0 / max(n, 1) + 1.0 / max(len(calibrated_s), 1))
    return max(FOLD_FLOOR_S, FOLD_SIGMAS * error)


def skipped_work(estimates_s: list[float], verified_s: list[float]) -> str | None:
    """Why the distribution looks like work done on some windows only, or None.

    ``verified_s`` are the per-call times of windows whose compared outputs were right: they did
    the whole work, so the fastest of them bounds an honest window from below (load only ever
    slows one down). A cluster of windows far under it did not do the work."""
    if len(estimates_s) < 10 or not verified_s:
        return None
    floor = min(verified_s)
    fast = [e for e in estimates_s if e < FAST_RATIO * floor and floor - e > FAST_MIN_GAP_S]
    if len(fast) >= max(3, math.ceil(FAST_MIN_SHARE * len(estimates_s))):
        return (f"{len(fast)} of {len(estimates_s)} timed windows took under {FAST_RATIO:.0%} per call of the fastest "
                f"window whose outputs were checked ({median(fast) * 1e3:.4g} ms vs {floor * 1e3:.4g} ms): the work "
                f"is done on some calls only")
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


def recheck_probability(total_calls: int, enabled: bool) -> float:
    """The secret probability with which each call's output is compared: an expected number of
    compared calls drawn per evaluation from ``RECHECK_EXPECTED``, over the calls there will be."""
    if not enabled or total_calls <= 0:
        return 0.0
    low, high = RECHECK_EXPECTED
    expected = low + (high - low) * secrets.SystemRandom().random()
    return min(1.0, expected / total_calls)


def chosen_calls(calls: int, probability: float) -> list[int]:
    """The calls of one window whose outputs are compared: each independently, with ``probability``."""
    rng = secrets.SystemRandom()
    return [j for j in range(calls) if rng.random() < probability]


@attrs.define
class Plan:
    """The windows of one timing, in the order they run: warm-up windows first, then timed, null,
    single-call and sampled windows shuffled in secret (the child cannot tell which is which)."""

    calls: int
    order: list[str]

    @classmethod
    def make(cls, calls: int, timed: int, warmup: int, single: bool, sampled: int) -> "Plan":
        rest = (["timed"] * timed + ["null"] * max(MIN_NULL, math.ceil(NULL_SHARE * timed))
                + (["single"] * SINGLE_WINDOWS if single and calls > 1 else []) + ["sampled"] * sampled)
        secrets.SystemRandom().shuffle(rest)
        return cls(calls=calls, order=["warmup"] * warmup + rest)

    def calls_of(self, kind: str) -> int:
        """A null window runs nothing; a single-call window one call; the others (sampled ones too,
        which must look like timed ones) ``calls``."""
        return 0 if kind == "null" else 1 if kind == "single" else self.calls

    def total_calls(self) -> int:
        return sum(self.calls_of(k) for k in self.order)


def warmup_windows(calls: int, warmup_calls: int) -> int:
    """Windows of ``calls`` calls that hold ``warmup_calls`` warm-up calls (at least one)."""
    return max(1, math.ceil(warmup_calls / max(calls, 1)))
