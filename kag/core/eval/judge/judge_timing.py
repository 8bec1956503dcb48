"""Timing the judge owns: every speed from the judge's clock, through one path for both sides.

Trusted side. A timing is a series of *windows* on the judge's ``perf_counter``. Before a window
the judge fills the child's staged input sets with fresh inputs and flushes the cache while the
child is stopped; then it resumes the child, rings each call (call ``j`` on set ``j``, answered as
soon as forward returns, the device not synchronised), rings the end (the child synchronises and
answers), waits on a GPU for a probe kernel of its own to find the GPU idle, and stops the child
again (kag.core.eval.judge.candidate_process). Nothing in the child can shorten a window: returning early
only moves its work into the probe's wait, and work put off past that cannot run, because the
process is stopped.

Both sides go through this one path. The candidate is one child of the judge; eager and
torch.compile run in another, the baseline runner (same harness, same doorbell, same windows, same
staging and flush, the same profiler session with kernel records around every call; unconfined, since
it runs only the task's own code).

Two window sizes, ``calls`` and ``short_calls`` (half as many), are interleaved in a secret order,
and a call's time is the difference of their median windows over the difference of their calls.
Everything a window pays once cancels (but its end: see below): the resume, the doorbells' first
round, the GPU switching from the judge's context to the child's and back, and the first call's cold
start (a resumed process's caches and its profiler's buffers: 0.15 to 0.8 ms on an H200, more than a
20 us kernel many times over). The child cannot tell a short window from a long one until it ends
(each call is rung alone), so it cannot make one kind's calls slower than the other's (its end: see
below). ``calls`` is chosen per side so that
a window holds about ``WINDOW_TARGET_S`` of work (on a GPU from an upper bound of a call, in rounds:
``upper_per_call_s``), within a memory budget for the staged inputs and kept outputs. Where not even two calls fit, windows of one call less interleaved *null windows*
(the path with nothing of forward in it) are the fallback.

What a window cannot see, and what covers it:
- Skipped work: outputs of calls chosen independently with a secret probability are compared after
  their window (kag.core.eval.judge.judge_calls); every call is a candidate for it, warm-up and checks too.
- Work put off until an output is asked for: there is no such moment. Outputs are read from the
  stopped candidate's memory where the window's end said they are (CPU: its address space; GPU: its
  CUDA allocations, mapped in the judge: kag.core.eval.candidate.gpu_outputs); no candidate code runs then.
  (An earlier design had the candidate hand re-checked GPU outputs over and charged any hand-over
  slower than calibrated to every call: honest hand-overs of fresh allocations were 0.25-0.46 ms
  slower, and small kernels were credited that.)
- Calls of one window that overlap on the GPU, or one call doing the work of later ones (a batch
  that knows it is one): per-call kernel records (kag.core.eval.candidate.observe) show them to the
  no-hidden-work guard. They come from the candidate's process, so a solution that rewrites its
  profiler's report could hide them: that is the residual of this design (a single-call latency
  floor was tried and dropped: a lone call's cold start, not its work, set it, and it penalised
  honest small kernels).
- A cluster of windows far faster than the windows whose outputs were verified is a violation
  (``skipped_work``); the candidate's own clock is a cross-check only (``cross_check``).
- A padded base: the child can tell a null window (``OP_NULL``, the base where a window holds one
  call) and delay it; its null base counts at most the baseline runner's null windows, with a margin
  (``null_base_cap``). It learns a window's size at its end, so a short window's time ends at its last
  call's answer (the child stopped there, its queued GPU work waited out) and its end is rung after,
  untimed; a long window's end stays in its time (``base_s``), so work put off into an end buys
  nothing and a padded end costs. Honest calls carry their end (``window_end_ms`` in the calibration)
  over ``K/2`` calls, on both sides alike. The child could tell a short window by the staged sets it
  left stale (tests/adversarial: stale_set_oracle, 1.39x eager, reward 2): every set is refilled
  before every window (kag.core.eval.judge.judge_windows). A call is
  answered only once it returned, so no call knows it is the last while it runs
  (kag.core.eval.candidate.candidate).
- A padded short base: a long window's last call knows it is last (its index), a short window's
  cannot, so work queued after every call and cancelled by the next stands only at a short window's
  end (tests/adversarial: cancelled_tail_pad). The intercept (2 short - long, both to the moment
  their calls' work was done) counts at most the runner's null windows to the same moment plus a
  slack (``intercept_cap``), and windows that held little of their work as measured are timed again
  with more calls (judge_calls ``too_short``): the pad buys at most ``(cap - F) / K`` a call, the
  slack and the runner's noise over a window's work. That bound is the residual.
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from typing import Callable

import attrs

from kag.core.eval.judge.timing import summarize  # noqa: F401 - part of this module's interface

WINDOW_TARGET_S = 0.010  # a GPU window holds about this much work (a padded short base buys at most the
# intercept cap's slack over a window's work: ``intercept_cap``; 5 ms before). A CPU window holds one call: CPU calls take
# milliseconds, and two calls' outputs kept alive defeat malloc's reuse of freed memory (the second call
# page-faults its output in: eager ReLU's second call took 10 ms instead of 1 on the 2-core machine). So on
# the CPU the base is the null windows, and the first call's cold start after a resume (caches, TLBs,
# OpenMP's sleeping threads: about 0.35 ms there, both sides) stays in: sub-millisecond CPU speed-ups read
# closer to 1 than they are
MAX_CALLS = 512  # calls in one window
SMALL_CALL_S = 1e-4  # a call this short fills its window with as many calls as fit (at most MAX_CALLS), not
# with WINDOW_TARGET_S of work: its first estimate (a cold, CPU-bound call) varies 2-3x, and windows sized
# from it differed between the sides and between evaluations of one solution (diag_matmul on an H100:
# 56-78 calls for eager, 32-191 for the candidate; the evaluation of 32 read 0.051 ms, the others
# 0.054-0.059: bench/results/2026-11-27-small-path)
INPUT_BUDGET_BYTES = 8 << 30  # staged inputs and kept outputs of one window, at most (on the CPU)
GPU_INPUT_BUDGET_BYTES = 24 << 30  # ... on a GPU, and at most GPU_FREE_SHARE of its free memory (the sets
GPU_FREE_SHARE = 0.45  # already staged counted back in): windows of an H100 hold 144-247 calls of a 13-24 us
# kernel. One budget for both sides, fixed after the checks (judge_calls.window_budget): where two calls do
# not fit, a window holds one, less null windows, and reads 0.2-0.3 ms high on an H100 (the first call's cold
# start after a resume is in a call's window, not in a null one); when eager, timed while the candidate held
# its sets, was sized from what was left, a 3.4 ms sum got windows of one call there and of two for the
# candidate, and read +9.6% (bench/results/2026-11-26-22fc00f-h100)
GPU_RESERVE_BYTES = 1 << 30  # free memory a window leaves (the call's own workspace, the allocator's slack)
NULL_SHARE = 1 / 3  # null windows per timed window (at least MIN_NULL), where windows hold one call
MIN_NULL = 10
NULL_CAP_RATIO = 1.25  # a candidate's null base counts at most this times the runner's ...
NULL_CAP_SLACK_S = 30e-6  # ... plus this (null_base_cap)
BASELINE_NULL_CAP_RATIO = 2.0  # ... and at most this times the baselines' own null windows plus the slack
SAMPLED_WINDOWS = {"cpu": 128, "cuda": 16}  # windows like the timed ones whose CPU time the judge samples
# (provenance), not timed: a CPU call of a millisecond holds one or two samples, a GPU window several.
# 128 on the CPU: with 64, a small fallback (tests/adversarial aten_dlsym) gave only 8-13 computing
# samples in some runs, too few for the verdict, and escaped in 2 of 14 runs; with 128 the fewest seen in
# 8 runs was 35, all caught
UNTIMED_SAMPLED_WINDOWS = 32  # an untimed evaluation's sampled windows, before more until the stops can judge
EXTRA_SAMPLED_WINDOWS = 256  # at most this many more sampled windows while the samples are too few to judge
RECHECK_EXPECTED = (12, 24)  # the expected number of compared calls, drawn per evaluation: with 12, a
# solution skipping work on one call in three is caught with probability 1 - (2/3)**12 = 99.2%
FAST_RATIO = 0.5  # a "skipped" window: its calls under half the fastest verified window's
FAST_MIN_GAP_S = 20e-6  # ... and this much under it (tiny kernels jitter)
FAST_MIN_SHARE = 0.2  # a cluster: at least this share of the timed windows (and 3 of them)
SKIP_ALPHA = 0.01  # ... and so many that an honest solution's windows look like that with at most this chance
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
    """How many calls a long window holds on a GPU: enough for ``WINDOW_TARGET_S`` of work (as many as
    fit for a call under ``SMALL_CALL_S``), at least two (a short window holds half), no more than the staged inputs and kept outputs fit in
    ``budget_bytes``, at most ``MAX_CALLS``. One on the CPU (``WINDOW_TARGET_S``'s note)."""
    if not gpu:
        return 1
    fit = budget_bytes // max(bytes_per_call, 1)
    want = max(2, math.ceil(WINDOW_TARGET_S / max(per_call_s, 1e-7)))
    if per_call_s < SMALL_CALL_S:  # as many as fit: the same count for both sides and every evaluation
        want = MAX_CALLS
    return int(max(1, min(want, fit, MAX_CALLS)))


@attrs.define
class WindowTiming:
    """What the judge measured of one side: its windows (seconds), by kind, and which long
    windows' compared outputs were right (indices into ``timed_s``)."""

    calls: int = 1  # calls in a long ("timed") window
    short_calls: int = 0  # ... in a short one (0: none, the null windows are the base)
    timed_s: list[float] = attrs.field(factory=list)
    short_s: list[float] = attrs.field(factory=list)
    null_s: list[float] = attrs.field(factory=list)
    end_s: list[float] = attrs.field(factory=list)  # long windows' ends: their time after the calls' work
    null_end_s: list[float] = attrs.field(factory=list)  # ... and the null windows' ends
    sampled_s: list[float] = attrs.field(factory=list)  # sampled windows, less the time their stops took
    verified: list[int] = attrs.field(factory=list)
    failed: bool = False  # a compared output was wrong: the timing stopped there
    base_cap_s: float | None = None  # the most a null base may be (``null_base_cap``), where it is one
    intercept_cap_s: float | None = None  # the most a short base's intercept may be (``intercept_cap``)

    @property
    def base(self) -> tuple[list[float], int]:
        """The windows a long one is compared with, and how many more calls a long one holds."""
        if self.short_s and self.calls > self.short_calls:
            return self.short_s, self.calls - self.short_calls
        return self.null_s, self.calls

    def base_s(self) -> float:
        """The base of a long window: the short windows' median, else the null windows' median (at most
        ``base_cap_s``). A short window's time stops at its last call's answer (its end shows its size:
        kag.core.eval.judge.candidate_process ``window``); a long one holds its end ``E``, all of it: with
        ``K`` calls of ``c``, a call reads ``c + 2E/K``. Work put off into a long window's end is
        charged there in full, so it buys nothing even where the child knows its window is long (a call
        of index ``K/2`` or more); half of ``E`` in the base, tried first, let such a solution charge
        half of its second half's work (tests/adversarial: defer_into_long_end). Each call describes
        its own output, so ``E`` holds no work that grows with ``K`` (a synchronisation, the answer)."""
        windows, _ = self.base
        base = median(windows)
        if self.base_cap_s is not None and windows is self.null_s:
            return min(base, self.base_cap_s)
        if self.intercept_cap_s is not None and windows is self.short_s and self.timed_s:
            return min(base, (median(self.drained_long_s()) + self.intercept_cap_s) / 2)
        return base

    def drained_long_s(self) -> list[float]:
        """The long windows less their ends: each up to the moment its calls' work was done, as a short
        window is timed."""
        if len(self.end_s) != len(self.timed_s):
            return list(self.timed_s)
        return [w - e for w, e in zip(self.timed_s, self.end_s)]

    def drained_null_s(self) -> list[float]:
        """The null windows less their ends (the path of a window up to its calls' answers)."""
        if len(self.null_end_s) != len(self.null_s):
            return list(self.null_s)
        return [w - e for w, e in zip(self.null_s, self.null_end_s)]

    def per_call_s(self) -> list[float]:
        """Each long window's time per call, less the base (``base_s``)."""
        _, span = self.base
        base = self.base_s()
        return [max(w - base, 0.0) / span for w in self.timed_s]

    def intercept_s(self) -> float:
        """What a window of no calls would take by the line through the long and short windows'
        medians (``2 short - long``): the path's cost per window, and whatever a window's first calls
        pay more than the rest."""
        return 2 * median(self.short_s) - median(self.timed_s)

    def drained_intercept_s(self) -> float:
        """``intercept_s`` with the long windows less their ends (``drained_long_s``): both kinds timed
        alike, to the moment their calls' work was done. What ``intercept_cap`` bounds."""
        return 2 * median(self.short_s) - median(self.drained_long_s())

    def resolution_s(self) -> float:
        """What the base's own noise is worth per call: one standard error of its median."""
        windows, span = self.base
        return median_error(windows) / span


def null_base_cap(runner_null_s: list[float], baseline_null_s: tuple[float, ...] = ()) -> float | None:
    """The most a candidate's null windows may count as its base: the baseline runner's null windows
    (the same harness running no solution code, timed with the same gap after each window), with
    ``NULL_CAP_RATIO`` and ``NULL_CAP_SLACK_S`` for what a confined process honestly pays more. A null
    window is an op of its own, so a solution can tell it and pad it (tests/adversarial: pad_null_windows):
    the larger its base, the faster its calls would read.

    The runner's null windows are timed once, after the candidate's: a burst of other work then (the
    2-core VM: a median of 0.97 ms against 0.29-0.46 in 19 other evaluations) raised the bound the padded
    base reads at, and a padded solution of 0.6x eager read 1.33x once in CI. So the baselines' own
    null windows (``TimingStats.null_ms``: timed with their windows, or cached) bound it too, at
    ``BASELINE_NULL_CAP_RATIO`` of the smallest: an honest candidate's null base was 1.06-1.65x eager's
    in 8 evaluations there (its path is confined and its gap longer), the runner's after it 0.85-1.83x in
    19 of 20 (bench/results/2026-11-29-e977a9c-cpu)."""
    if len(runner_null_s) < 3:
        return None
    cap = NULL_CAP_RATIO * median(runner_null_s) + NULL_CAP_SLACK_S
    if baseline_null_s:
        cap = min(cap, BASELINE_NULL_CAP_RATIO * min(baseline_null_s) + NULL_CAP_SLACK_S)
    return cap


INTERCEPT_SLACK_S = 0.6e-3  # a candidate's drained intercept counts at most the runner's drained null window plus this


def intercept_cap(runner_drained_null_s: list[float], baseline_intercepts_s: tuple[float, ...] = ()) -> float | None:
    """The most a candidate's drained intercept (``WindowTiming.drained_intercept_s``: 2 short - long,
    the long windows less their ends, what a window of no calls would take to its calls' answers and
    their work) may count: the baseline runner's null windows less their ends, or the same intercept of
    the task's own baselines (eager's, torch.compile's: timed by the runner, trusted; the smallest of
    them) where larger, plus ``INTERCEPT_SLACK_S``.

    A short window's last call cannot know it is last, but a long window's can (its index, ``K - 1``):
    a solution that queues after every call a spin the next call cancels leaves one standing only
    at a short window's end, where the judge waits it out (tests/adversarial: cancelled_tail_pad).
    That raises the short base by the spin ``P`` and the intercept by ``2P``; a call reads
    ``c - 2P/K``, with no limit in ``P`` before this bound. No window design that takes long less
    short refuses it by itself (the spin can depend on the call's index), so the base is bounded
    from outside: the short base counts at most ``(drained long + cap) / 2``, and a spin buys at most
    ``(cap - F) / K`` a call, ``F`` the honest drained intercept (tests/adversarial:
    cancelled_tail_pad_tuned, a spin sized to stay under the cap).

    Both sides of the bound leave the ends out: a long window's end (0.2-0.5 ms on an H100, untrusted
    in the candidate's) is not in a short window, and the runner's null windows hold one each, so the
    first cap (the runner's whole null windows plus 1 ms, against 2 short - long) left the spin about
    2 ends more than the slack (1.1-2.3 ms of a call's 5-12 ms windows, 10-50%, by the windows of
    bench/results/2026-11-28-sizing; worked out, not run as an attack). The slack is what a
    candidate's first calls after a resume honestly pay more than the runner's null path (its own
    code's cold start); more reads slower, never faster. A task's first calls after a resume can cost
    more than the null path whoever runs them: relu@128x64k's eager had a drained intercept of 4.13 ms
    against the runner's null windows' 0.93, its candidate 4.17, and capped at the null windows alone
    the candidate's base lost 1.3 ms (6.9 us of its 41 us a call) and it read 16% slower than CUPTI
    says (bench/results/2026-11-28-6758ecb-h100, call 1): the baselines' intercepts measure that on
    the reference's side, so both sides are bounded alike. The smallest of them, not the largest:
    torch.compile's path pays a cold start of its own (diag_matmul's: 1.4-2.8 ms against eager's 0.52
    and the candidate's 0.8-1.2, call 3), which would have left a spin 2 ms of room."""
    if len(runner_drained_null_s) < 3:
        return None
    lent = min(baseline_intercepts_s) if baseline_intercepts_s else 0.0
    return max(median(runner_drained_null_s), lent) + INTERCEPT_SLACK_S


def skipped_work(estimates_s: list[float], verified_s: list[float]) -> str | None:
    """Why the distribution looks like work done on some windows only, or None.

    ``verified_s`` are the per-call times of windows whose compared outputs were right: they did
    the whole work, so the fastest of them bounds an honest window from below (load only ever
    slows one down). A cluster of windows far under it did not do the work, provided the cluster
    cannot be chance: the compared windows are a secret random choice, so for an honest solution
    the chance that all k of them missed the m fastest of n windows is C(n-m, k) / C(n, k), whatever
    the noise (a 2-core VM's CPU calls vary 5x: a rule on the ratio alone fired on 1 honest ReLU in
    4 there, with 3 compared windows of 20). A claim needs that chance under ``SKIP_ALPHA``."""
    if len(estimates_s) < 10 or not verified_s:
        return None
    floor = min(verified_s)
    fast = [e for e in estimates_s if e < FAST_RATIO * floor and floor - e > FAST_MIN_GAP_S]
    n, k = len(estimates_s), len(verified_s)
    chance = math.comb(n - len(fast), k) / math.comb(n, k)
    if len(fast) >= max(3, math.ceil(FAST_MIN_SHARE * n)) and chance < SKIP_ALPHA:
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


def check_slots(calls: int, probability: float) -> int:
    """How many outputs the judge captures after a window of ``calls`` calls, however many of them
    are compared: the same work after every window of a size, so the pause that follows (the
    candidate's clock runs while it is stopped) cannot tell a compared call from another when the
    work overruns the padded pause (tests/core/eval/judge/test_pauses.py). Three times the expected
    number of compared calls, at least one."""
    if probability <= 0 or calls <= 0:
        return 0
    return max(1, math.ceil(3 * calls * probability))


def chosen_calls(calls: int, probability: float) -> list[int]:
    """The calls of one window whose outputs are compared: each independently, with ``probability``
    (at most ``check_slots`` of them; more is all but impossible, and would show in the pause)."""
    rng = secrets.SystemRandom()
    chosen = [j for j in range(calls) if rng.random() < probability]
    slots = check_slots(calls, probability)
    return sorted(rng.sample(chosen, slots)) if len(chosen) > slots else chosen


def window_checks(calls: int, probability: float, at_once: bool) -> tuple[list[int], int]:
    """The calls of a window whose outputs are compared, and how many decoy captures fill the rest
    of its ``check_slots``. Compared ``at_once`` (in the pause: outputs too large to keep), a decoy
    would have to cost a comparison, so the slots are filled with real checks of other calls first."""
    picked, slots = chosen_calls(calls, probability), check_slots(calls, probability)
    if at_once:
        rest = [j for j in range(calls) if j not in picked]
        secrets.SystemRandom().shuffle(rest)
        picked = sorted(picked + rest[:slots - len(picked)])
    return picked, slots - len(picked)


@attrs.define
class Plan:
    """The windows of one timing, in the order they run: warm-up windows first, then long, short
    (or null) and sampled windows shuffled in secret (the child cannot tell which is which before a
    window ends)."""

    calls: int
    order: list[str]
    short_calls: int = 0

    @classmethod
    def make(cls, calls: int, timed: int, warmup: int, sampled: int) -> "Plan":
        short = calls // 2 if calls >= 2 else 0
        base = ["short"] * timed if short else ["null"] * max(MIN_NULL, math.ceil(NULL_SHARE * timed))
        rest = ["timed"] * timed + base + ["sampled"] * sampled
        secrets.SystemRandom().shuffle(rest)
        return cls(calls=calls, order=["warmup"] * warmup + rest, short_calls=short)

    def calls_of(self, kind: str) -> int:
        """A null window runs nothing; a short window ``short_calls``; the others (sampled ones too,
        which must look like timed ones) ``calls``."""
        return 0 if kind == "null" else self.short_calls if kind == "short" else self.calls

    def total_calls(self) -> int:
        return sum(self.calls_of(k) for k in self.order)


def estimate_plan(calls: int) -> Plan:
    """A first estimate of a call's time on the CPU (where a window holds one call): a long window
    (warming up), then a null one and a long one again; the first long window is not counted
    (``warm_per_call_s``). On a GPU windows are sized by ``sizing_plan``."""
    short = calls // 2 if calls >= 2 else 0
    return Plan(calls=calls, order=["timed", "short" if short else "null", "timed"], short_calls=short)


def warm_per_call_s(timing: WindowTiming) -> float:
    """A call's time from ``estimate_plan``'s windows (the last long window's share of its calls,
    an overestimate, when noise puts the base above it)."""
    last = timing.timed_s[-1]
    _, span = timing.base
    diff = last - timing.base_s()
    return diff / span if diff > 0 else last / max(timing.calls, 1)


SIZING_ROUNDS = 3  # at most, on a GPU: rounds of windows that size the timed ones (``sizing_plan``)
SIZING_GROWTH = 1.5  # another round only where the last one asks for this many times its calls


def sizing_plan(calls: int, first: bool) -> Plan:
    """Windows of ``calls`` calls that size the timed ones on a GPU: three in the first round (the
    first warms up: torch.compile compiles, kernels load lazily, and it is not counted), two after."""
    return Plan(calls=calls, order=["timed"] * (3 if first else 2))


def upper_per_call_s(timing: WindowTiming, skip: int) -> float:
    """An upper bound of a call's time: the fastest long window after the first ``skip``, less its
    end, over its calls (a window holds its calls' work and the path's cost). A bound, not a
    difference: the difference of a long and a short window of 5 and 2 calls, which sized windows
    before, was the path's jitter (0.1-1 ms on an H100) over 3 calls, and a long window's end (0.2-0.4
    ms) was in it; a 24 us kernel read 0.1-2.5 ms, and relu's eager got windows of 2 or 7 calls
    against the candidate's 384 (+25% against CUPTI; diag_matmul's candidate 34-191 calls from one
    evaluation to the next: bench/results/2026-11-27-short-end, 2026-11-28-sizing). Each round of
    ``sizing_plan`` sizes the next from this bound, so the path's share shrinks as windows grow."""
    windows = timing.timed_s[skip:] or timing.timed_s
    ends = timing.end_s[skip:] if len(timing.end_s) == len(timing.timed_s) else []
    if len(ends) == len(windows):
        windows = [w - e for w, e in zip(windows, ends)]
    return max(min(windows), 0.0) / max(timing.calls, 1)


def timed_windows(calls: int, num_timed: int, gpu: bool = False) -> int:
    """Timed windows of a timing (and as many short ones): ``num_timed`` where a CPU window holds one
    call; where a window holds several (each window averages its calls), a third of that, at least
    20 (or ``num_timed`` if fewer). A GPU window holds one call only when that call is a few
    milliseconds long or its inputs fill the memory budget: its jitter is a small share of it, and
    as many windows do as for several calls (100 windows of a 6.4 GB ReLU took 35 s)."""
    return num_timed if calls == 1 and not gpu else max(min(num_timed, 20), num_timed // 3)


GPU_WARMUP_WINDOWS = 3  # at most, on a GPU: a window there holds a few milliseconds of work (or one long call)


def warmup_windows(calls: int, warmup_calls: int, gpu: bool = False) -> int:
    """Windows of ``calls`` calls that hold ``warmup_calls`` warm-up calls (at least one; on a GPU
    at most ``GPU_WARMUP_WINDOWS``)."""
    n = max(1, math.ceil(warmup_calls / max(calls, 1)))
    return min(n, GPU_WARMUP_WINDOWS) if gpu else n
