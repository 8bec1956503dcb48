"""The judge's secret re-checks of timed calls: reading an output from the stopped candidate, the
decoy reads that fill every window's fixed number of slots, the memory kept copies will use, the
padded pause after a window, and the comparisons after the last one.

Trusted side. ``SecretRechecks`` is a part of ``kag.core.eval.judge.judge_calls.CandidateCalls`` (a mixin:
it works on that object's state: the judge, its spec and report, where the last window's outputs are,
the secret probability, the captured outputs pending). After every window each of its calls is compared
with a secret probability (independent per call, so no count of checks is ever used up) and the judge
reads the same number of outputs whether or not any is compared, so the pause that follows, padded to
one length, says nothing of it (tests/core/eval/judge/test_pauses.py). A compared output is copied out
while the candidate is stopped and compared after the last window; one too large to keep a dozen of
(on a GPU) is read at secret positions only (kag.core.eval.judge.output_samples).
"""

from __future__ import annotations

import math
import secrets
import time
from typing import Any

from kag.core.eval.judge.candidate_process import CandidateProcess

PAUSE_MARGIN = 1.3  # the padded gap: this much over the gap's measured parts
RUNNER_POISON_BYTES = 256 << 20  # the runner's poison, timed on at most this much memory (a 6.4 GB output's
# poison twice over would not fit beside the candidate's on a GPU)


class SecretRechecks:
    """Reading, re-checking and comparing a candidate's outputs (``CandidateCalls`` holds the state)."""

    judge: Any
    spec: Any
    cuda: bool
    candidate: Any
    reader: Any
    where: list[Any]
    model: Any
    reference_output: Any
    sample_plan: Any
    defer_checks: bool
    recheck_p: float
    rechecked: int
    calls_seen: int
    compared_at: list[int]
    capture_s: float
    verify_s: float
    pending: list[tuple[str, int, Any, int | None]]
    runner_gap_parts: tuple[float, float, int, float, int]

    def capture(self, index: int, sampled: bool = False) -> Any:
        """Output ``index`` of the last window, the judge's own copy, read from the stopped
        candidate's memory where the window's end said it is (CPU: its address space; GPU: its
        allocations, mapped here), so nothing it does after answering can change it and no work can
        be put off until an output is asked for. ``sampled`` (GPU): only the values at the secret
        positions of ``self.sample_plan`` (kag.core.eval.judge.output_samples). A string says why it
        could not be read."""
        import torch

        from kag.core.eval.candidate.checks import iter_tensors
        from kag.core.eval.judge.judge_inputs import replace_tensors

        template = self.reference_output
        tensors = list(iter_tensors(template))
        found = self.where[index * len(tensors):(index + 1) * len(tensors)]
        why = ("its output was not where the window's end said it is (outputs must be plain tensors, laid out as "
               "the reference's on the CPU, allocated by PyTorch on a GPU)")
        if len(found) != len(tensors):
            return why + (f": {self.where_error}" if getattr(self, "where_error", None) else
                          f": {len(found)} of {len(tensors)} tensors described")
        read = []
        for k, (t, place) in enumerate(zip(tensors, found)):
            if self.cuda:
                positions = self.sample_plan.positions[k] if sampled and self.sample_plan is not None else None
                got = self.reader.read(place, t) if positions is None else self.reader.read_at(place, t, positions)
                if isinstance(got, str):
                    return f"{why}: {got}"
                read.append(got)
                continue
            address, size = place
            if not address or size != t.numel() * t.element_size():
                return why
            data = bytearray(self.candidate.read_memory(address, size))
            read.append(torch.frombuffer(data, dtype=t.dtype).reshape(t.shape))
        return replace_tensors(template, iter(read))

    def reference_on(self, seed: int) -> Any:
        """The reference's output on the inputs of ``seed`` (the inputs freed at once)."""
        import torch

        inputs = self.judge.make_inputs(seed)
        with torch.no_grad():
            return self.model(*inputs)

    def verify(self, out: Any, seed: int, where: str) -> str | None:
        """``out`` against the reference on the inputs of ``seed``: the mismatch, None when right."""
        if isinstance(out, str):
            return out
        ref = self.reference_on(seed)
        mismatch = self.judge.compare(ref, out, seed, where)
        del ref
        return mismatch

    def reserve_kept(self, expected: float) -> None:
        """Memory for the outputs kept until the last window, taken and given back before the timing
        (as many copies as could be kept, but for a chance under 1e-4): a compared call's kept copy
        then comes from memory already mapped (the judge's heap keeps what is freed, a GPU's caching
        allocator its blocks), as a decoy's dropped copy does. Without it only the pause after a
        compared window faulted fresh pages in (a 4 MiB copy: 3.9 ms kept against 0.3 ms dropped on
        the VM), and the gap the candidate sees ran long after a compared call."""
        from kag.core.eval.judge.judge_timing import RECHECK_EXPECTED

        if not self.defer_checks or expected <= 0:
            return
        count = min(2 * RECHECK_EXPECTED[1], math.ceil(expected + 4 * math.sqrt(expected) + 2))
        held = [self.capture(0, sampled=self.sample_plan is not None) for _ in range(count)]
        del held

    def pause_s(self, cand: CandidateProcess, calls: int) -> float:
        """The gap after every window: refilling its sets and flushing, poisoning, and the outputs
        a window's re-checks capture (compared there too when they are too large to keep), measured,
        with a margin."""
        from kag.core.eval.judge.judge_timing import check_slots

        t0 = time.perf_counter()
        for j in range(calls):
            self.judge.fill(self.sets[j], self.judge.make_inputs(self.judge.derived_seed("pause", j)))
        self.judge.settle()
        fill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        cand.exchange(("poison", None), self.spec.timeouts.check_s, "poisoning", expect="poisoned")
        poison_s = time.perf_counter() - t0
        checks = max(1, check_slots(calls, self.recheck_p))
        per_check = self.capture_s + (0.0 if self.defer_checks else self.verify_s)
        if self.sample_plan is not None:  # a sampled capture, timed on the last window's outputs (the
            self.capture(0, sampled=True)  # second: the first loads the gather's kernels)
            t0 = time.perf_counter()
            self.capture(0, sampled=True)
            per_check = 2.0 * (time.perf_counter() - t0)
        self.runner_gap_parts = (fill_s, poison_s, checks, per_check, min(calls, 2))  # runner_pause_s's
        return PAUSE_MARGIN * (fill_s + poison_s + checks * per_check)

    def own_copy_s(self) -> float:
        """What a capture's copy costs the judge on its own memory: the reference's output copied
        as a capture copies it (the second of two copies timed)."""
        import torch

        from kag.core.eval.candidate.checks import iter_tensors

        tensors = list(iter_tensors(self.reference_output))

        def copy() -> list[Any]:
            if self.cuda:
                picked = (self.sample_plan.pick(self.reference_output) if self.sample_plan is not None
                          else [t.clone() for t in tensors])
                torch.cuda.synchronize()
                return picked
            return [bytearray(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()) for t in tensors]

        copy()
        t0 = time.perf_counter()
        copy()
        return time.perf_counter() - t0

    def runner_pause_s(self) -> float:
        """The gap the baseline runner's null windows are timed after, sized as the candidate's
        (``pause_s``) from parts the candidate cannot stretch: the judge's refill, the runner's own
        poison of memory the outputs' size, and the checks' captures at most what the judge's own
        copy of the reference's output costs. A candidate that spun in its own poison or slowed its
        captures when the gap was sized lengthened only its own gaps: the runner, timed after the
        same long gaps while its core idled, read its null windows 3-4x longer on the VM, and lifted
        the bound on the candidate's null base with them (bench/results/2026-11-29-e977a9c-cpu)."""
        from kag.core.eval.judge.judge_sizing import tree_bytes

        fill_s, poison_s, checks, per_check, outputs = self.runner_gap_parts
        own_check = 2.0 * self.own_copy_s() + (0.0 if self.defer_checks else self.verify_s)  # here: only where
        # a runner is timed after it
        total = outputs * tree_bytes(self.reference_output)
        part = max(1, min(total, RUNNER_POISON_BYTES))  # more is timed at this size and scaled
        runner, limit = self.judge.runner, self.spec.timeouts.check_s
        self.judge.prepare_runner()
        took = []
        for _ in range(2):  # the second: the first may find the runner cold
            t0 = time.perf_counter()
            runner.exchange(("poison", [([part], 1)]), limit, "poisoning the runner's memory", expect="poisoned")
            took.append(time.perf_counter() - t0)
        return PAUSE_MARGIN * (fill_s + min(poison_s, min(took) * total / part) + checks * min(per_check, own_check))

    def rechecker(self, cand: CandidateProcess):
        """What runs after each window: where its outputs are is read from its end; each of its
        calls chosen with the secret probability has its output copied out of the stopped
        candidate's memory, to be compared after the last window (now, when outputs are too large
        to keep); then the memory the size of its outputs is poisoned."""

        def after(kind: str, calls: int, seeds: list[int], timing: Any) -> bool | None:
            from kag.core.eval.judge.judge_timing import window_checks

            self.window_ended(cand)
            chosen = False
            first, self.calls_seen = self.calls_seen, self.calls_seen + calls
            picked, decoys = window_checks(calls, self.recheck_p, at_once=not self.defer_checks)
            if not self.decoy_captures(decoys, calls, seeds, kind):
                return None
            for j in picked:
                self.rechecked += 1
                self.compared_at.append(first + j)
                where = f"a {kind} call (one of those compared in secret)"
                out = self.capture(j, sampled=self.sample_plan is not None)
                if self.defer_checks and not isinstance(out, str):
                    self.pending.append((kind, seeds[j], out, len(timing.timed_s) - 1 if kind == "timed" else None))
                else:
                    mismatch = self.verify(out, seeds[j], where)
                    if mismatch is not None:
                        self.judge.fail("mismatch", f"{where}: {mismatch}")
                        return None
                    chosen = True
            cand.exchange(("poison", None), self.spec.timeouts.check_s, "poisoning", expect="poisoned")
            return chosen

        return after

    def decoy_captures(self, count: int, calls: int, seeds: list[int], kind: str) -> bool:
        """``count`` captures of the last window's outputs that are not kept (the slots
        ``check_slots`` fixes that no compared call filled): the same reads as a compared call's, so
        the work after a window does not depend on how many were compared. An output that cannot be
        read fails as it would have compared; compared at once, a decoy is compared too."""
        rng = secrets.SystemRandom()
        for _ in range(count):
            j = rng.randrange(calls)
            out = self.capture(j, sampled=self.sample_plan is not None)
            where = f"a {kind} call (one of those compared in secret)"
            mismatch = out if isinstance(out, str) else None if self.defer_checks else self.verify(out, seeds[j], where)
            if mismatch is not None:
                self.judge.fail("mismatch", f"{where}: {mismatch}")
                return False
        return True

    def verify_pending(self, timing: Any) -> bool:
        """Compare the captured outputs (after the last window); a mismatch fails the evaluation."""
        from kag.core.eval.judge.output_samples import verify_sampled

        pending, self.pending = self.pending, []
        for kind, seed, out, window in pending:
            where = f"a {kind} call (one of those compared in secret)"
            mismatch = (verify_sampled(self, self.sample_plan, out, seed, where) if self.sample_plan is not None
                        else self.verify(out, seed, where))
            if mismatch is not None:
                self.judge.fail("mismatch", f"{where}: {mismatch}")
                return False
            if window is not None and window not in timing.verified:
                timing.verified.append(window)
        timing.verified.sort()
        return True
