"""How many calls a window holds, and the memory it may take: one budget for both sides (the
candidate's windows and the baselines'), rounds of sizing windows on a GPU.

Trusted side. ``WindowSizing`` is a part of ``kag.core.eval.judge.judge_calls.CandidateCalls`` (a mixin: it
works on that object's state: the judge, its spec and report, the task's inputs and reference output);
the arithmetic is kag.core.eval.judge.judge_timing's.
"""

from __future__ import annotations

from typing import Any, Callable

from kag.core.eval.judge.candidate_process import CandidateProcess


def tree_bytes(obj: Any) -> int:
    from kag.core.eval.candidate.checks import iter_tensors

    return sum(t.numel() * t.element_size() for t in iter_tensors(obj))


class WindowSizing:
    """Windows' calls and memory (``CandidateCalls`` holds the state)."""

    judge: Any
    spec: Any
    report: Any
    cuda: bool
    local: Any
    reference_output: Any
    sets: list[list[Any]]
    _window_budget: int | None

    def sets_that_fit(self, calls: int) -> int:
        """At most ``calls`` input sets, as many as fit the memory budget (at least one)."""
        per_call_bytes = tree_bytes(self.local) + tree_bytes(self.reference_output)
        return int(max(1, min(calls, self.budget_bytes() // max(per_call_bytes, 1))))

    def budget_bytes(self, staged: int = 0) -> int:
        """The bytes a window's sets and outputs may take: on a GPU a share of the free memory plus
        ``staged`` (what the sets already allocated for it hold: they are part of the window)."""
        from kag.core.eval.judge.judge_timing import GPU_FREE_SHARE, GPU_INPUT_BUDGET_BYTES, INPUT_BUDGET_BYTES

        if not self.cuda:
            return INPUT_BUDGET_BYTES
        import torch

        free, _total = torch.cuda.mem_get_info()
        return int(min(GPU_INPUT_BUDGET_BYTES, GPU_FREE_SHARE * (free + staged)))

    def window_budget(self) -> int:
        """One memory budget for every window of this evaluation, the candidate's and the baselines'
        alike: fixed when the first window is sized (after the checks, whichever side is timed first),
        with every set the judge has staged in either process counted back. Sized each from the
        memory free at its own time, eager, timed while the candidate held its sets, got windows of
        one call where the candidate had two (+9.6% on a 3.4 ms sum on an H100)."""
        if self._window_budget is None:
            staged = (len(self.sets) + len(getattr(self.judge, "runner_sets", []))) * tree_bytes(self.local)
            self._window_budget = self.budget_bytes(staged)
            self.report.calibration["window_budget_bytes"] = self._window_budget
        return self._window_budget

    def room_bytes(self, staged: int) -> int:
        """What a process can really stage now: the free memory (less a margin) plus its own ``staged``
        sets. A window is cut to it only where the shared budget does not fit (noted)."""
        if not self.cuda:
            return self.window_budget()
        import torch

        from kag.core.eval.judge.judge_timing import GPU_RESERVE_BYTES

        free, _total = torch.cuda.mem_get_info()
        return int(max(0, free - GPU_RESERVE_BYTES) + staged)

    def window_calls(self, proc: CandidateProcess, sets: list[list[Any]], per_call_s: float,
                     timeout_s: float) -> int:
        """How many calls a window of ``proc`` holds (kag.core.eval.judge.judge_timing.choose_calls, within
        ``window_budget``), its input sets allocated."""
        from kag.core.eval.judge.judge_timing import choose_calls

        per_call_bytes = tree_bytes(self.local) + tree_bytes(self.reference_output)
        calls = choose_calls(per_call_s, per_call_bytes, self.window_budget(), self.cuda)
        room = self.room_bytes(len(sets) * tree_bytes(self.local))
        if calls > 1 and calls * per_call_bytes > room:
            fit = max(1, room // max(per_call_bytes, 1))
            note = (f"timing: windows of {fit} call(s), not {calls}: the device had no room for more "
                    f"(the sides' windows may differ in length)")
            if note not in self.report.notes:
                self.report.notes.append(note)
            calls = int(fit)
        self.add_sets(proc, calls, timeout_s, sets)
        return calls

    def sized_calls(self, proc: CandidateProcess, sets: list[list[Any]], first: int,
                    run_round: Callable[[Any], Any]) -> tuple[int, float, Any]:
        """How many calls a timed window of ``proc`` holds, a call's estimated time, and the last
        sizing windows' timing (``failed``: a compared output was wrong). ``run_round(plan)`` runs
        windows. On the CPU a window holds one call (judge_timing.estimate_plan); on a GPU rounds of
        ``sizing_plan`` windows, each sized from the last's upper bound of a call
        (judge_timing.upper_per_call_s), until a round asks for no more calls."""
        from kag.core.eval.judge.judge_timing import (SIZING_GROWTH, SIZING_ROUNDS, estimate_plan, sizing_plan,
                                                upper_per_call_s, warm_per_call_s)

        load_s = self.spec.timeouts.load_s
        if not self.cuda:
            warm = run_round(estimate_plan(first))
            if warm.failed:
                return first, 0.0, warm
            per = warm_per_call_s(warm)
            return self.window_calls(proc, sets, per, load_s), per, warm
        calls = first
        for round_ in range(SIZING_ROUNDS):
            warm = run_round(sizing_plan(calls, first=round_ == 0))
            if warm.failed:
                return calls, 0.0, warm
            per = upper_per_call_s(warm, skip=1 if round_ == 0 else 0)
            wanted = self.window_calls(proc, sets, per, load_s)
            if wanted < SIZING_GROWTH * calls:
                return wanted, per, warm
            calls = wanted
        return calls, per, warm
