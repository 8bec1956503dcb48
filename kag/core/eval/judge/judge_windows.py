"""The judge's loop over a plan of windows, one loop for the candidate and the baseline runner.

Trusted side. For each window of a ``Plan`` (kag.core.eval.judge.judge_timing): fresh inputs into every
one of the child's staged sets (each its own seed, a keyed hash the child cannot invert),
the cache flushed, the GPU idle, then the window on the judge's clock (a short window's without its
end: kag.core.eval.judge.candidate_process ``window``). On a GPU the child runs its windows raised
above the host's other work (kag.core.eval.judge.priority), the candidate and the runner alike. ``after`` runs between
windows (the candidate's secret re-checks and poisoning); ``pause_s`` makes every gap between two
windows, as the child's own clock sees it, the same length whatever ``after`` did. What the gap does
not hide: the delay from a window's end to its poison request grows with the outputs captured, so
the child can learn afterwards whether a window was compared (of no use to it then: each call is
drawn for comparison on its own, in secret, after its window).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from kag.core.eval.judge.judge_timing import Plan, WindowTiming

# after(kind, calls, seeds, timing) -> whether outputs of the window were compared and right;
# raises CandidateFailure to end the timing (a failed hand-over), returns None on a mismatch it reported
After = Callable[[str, int, list[int], WindowTiming], "bool | None"]


def run_windows(judge: Any, proc: Any, sets: list[list[Any]], plan: Plan, *, purpose: str, timeout_s: float,
                phase: str, after: After | None = None, pause_s: float = 0.0,
                sampler: Callable[[int, WindowTiming], Any] | None = None, deadline: float | None = None,
                counter: list[int] | None = None) -> WindowTiming:
    """Run ``plan`` on ``proc`` (a kag.core.eval.judge.candidate_process.CandidateProcess) whose input sets
    the judge sees as ``sets``; return the windows by kind. ``counter`` numbers the calls across
    timings (seeds never repeat); ``sampler(calls, timing)`` makes a fresh CPU sampler for a sampled window of ``calls`` calls
    (``timing``: the windows so far).
    ``deadline`` (monotonic) ends the timing as a timeout."""
    from kag.core.eval.judge.priority import timed_priority

    with timed_priority(proc, raise_it=bool(getattr(judge, "cuda", False))) as nice:
        if nice is not None and hasattr(judge, "report"):
            judge.report.calibration["timed_nice"] = nice
        return _run(judge, proc, sets, plan, purpose=purpose, timeout_s=timeout_s, phase=phase, after=after,
                    pause_s=pause_s, sampler=sampler, deadline=deadline, counter=counter)


def _run(judge: Any, proc: Any, sets: list[list[Any]], plan: Plan, *, purpose: str, timeout_s: float, phase: str,
         after: After | None, pause_s: float, sampler: Callable[[int, WindowTiming], Any] | None,
         deadline: float | None, counter: list[int] | None) -> WindowTiming:
    from kag.core.eval.judge.candidate_process import CandidateFailure

    timing = WindowTiming(calls=plan.calls, short_calls=plan.short_calls)
    counter = counter if counter is not None else [0]
    last_end: float | None = None
    for kind in plan.order:
        calls = plan.calls_of(kind)
        seeds = []
        for j in range(max(calls, len(sets)) if calls else 0):  # every set, used or not: one left stale
            seed = judge.derived_seed(purpose, counter[0])  # told the child its window was short
            counter[0] += 1  # (tests/adversarial: stale_set_oracle). A null window runs none: it is told by its op
            if j < calls:
                seeds.append(seed)
            judge.fill(sets[j], judge.make_inputs(seed))
        judge.settle()
        if last_end is not None and pause_s > 0:  # the same gap after every window
            wait = last_end + pause_s - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        left = timeout_s if deadline is None else deadline - time.monotonic()
        if left <= 0:
            raise CandidateFailure("timeout", f"{phase} did not finish within its time limit")
        stops = sampler(calls, timing) if (kind == "sampled" and sampler is not None) else None
        # a short window ends at its last call's answer: its end, where the child learns its size, is untimed
        window = proc.window(calls, left, phase, null=(kind == "null"), sampler=stops, end_timed=(kind != "short"))
        last_end = time.perf_counter()
        if stops is not None:
            timing.sampled_s.append(max(0.0, window - stops.stopped_s))
            if hasattr(stops, "prov"):  # the absolute count: this window's call time
                stops.prov.window_done(window, stops)
        if kind == "timed":
            timing.timed_s.append(window)
            timing.end_s.append(proc.end_s)
        elif kind == "null":
            timing.null_s.append(window)
            timing.null_end_s.append(proc.end_s)
        elif kind == "short":
            timing.short_s.append(window)
        if after is not None and calls:
            verdict = after(kind, calls, seeds, timing)
            if verdict is None:  # a mismatch: the verdict is in
                timing.failed = True
                return timing
            if verdict and kind == "timed":
                timing.verified.append(len(timing.timed_s) - 1)
    return timing
