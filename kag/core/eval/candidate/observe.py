"""What the candidate's calls did, as an observer running through every one of them saw it.

``CallObserver`` runs in the candidate process (untrusted side), and in the baseline runner alike.
One session is on from before model_new.py is imported to after the last window, so every call,
checked or timed, runs under the same session. It counts the PyTorch operators that ran inside
``ModelNew.forward`` (RecordFunction sees Python and C++ callers alike, on any thread) and
torch.compile's markers, and records the GPU kernels, each attributed to the call that launched it.
Where the judge loaded kag's operator counter (kag.core.eval.judge.op_counter_lib; the default where a
C++ compiler and torch's headers are found) the operators are counted by it and the kernels come from
kag's CUPTI recorder (kag.core.eval.candidate.kernel_records): no torch.profiler session runs, which
took a small kernel's call from 22-23 us of CPU to 16-18 on an H200 (bench/results/2026-11-29-opcounter-h200).
Otherwise (``KAG_OBSERVER=profiler``, no compiler) torch.profiler's session records both, as before;
``KAG_KERNEL_RECORDER=kag`` then takes the kernels from kag's recorder beside its CPU records.
Across the calls of a window it reports what a solution that knows it is one of many calls might do:
a call's kernels still running when the next call's start (overlap), one call holding most of a
window's GPU time (doing its neighbours' work), calls that launched nothing.

``Observations`` is plain data; the judge's guard plugins read it (``check_observations``). It is
a report from an untrusted process: a policy signal, not a measurement. Timing and correctness
never depend on it (kag.core.eval.judge.judge_timing, kag.core.eval.judge.compare).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator


from kag.core.eval.candidate.kernel_records import MARK as MARK_ID
from kag.core.eval.candidate.observations import (COMPILED_MARKERS, FORWARD_RANGE, HARNESS_MARK, HARNESS_POST_OPS,
                                                  HARNESS_RANGES, NULL_RANGE, POST_RANGE, WINDOW_RANGE, Observations)

class CallObserver:
    """One session spanning all of a candidate's calls: kag's operator counter and (on a GPU) its
    kernel recorder where the judge loaded the counter, else torch.profiler's session; each call of
    forward is marked (``enter_call``/``exit_call``)."""

    def __init__(self, device: str, kernels: bool = True) -> None:
        self.device = device
        self.kernels = kernels  # record GPU kernels (kag's CUPTI recorder, else the profiler's)
        self._prof: Any = None
        self.calls = 0
        self.error: str | None = None
        from kag.core.eval.candidate.profiler_events import range_class

        self._range_type: Any = range_class()  # resolved once: it is entered on every call
        self._open: Any = None  # the profiler's range of the call in progress
        self.recorder: Any = None  # kag.core.eval.candidate.kernel_records.KernelRecorder, on a GPU
        self.counter: Any = None  # kag.core.eval.candidate.op_counter.OpCounter, where the judge loaded it
        self.windows = 0
        self.nulls = 0  # null calls (the counter checks its own count of them)
        self.call_window: list[int] = []  # the window of each call (the recorder's ids are 1, 2, ...)

    def start(self) -> None:
        from kag.core.eval.candidate.op_counter import OpCounter

        gpu = self.device.startswith("cuda") and self.kernels
        self.counter = OpCounter.loaded()
        if self.counter is not None and gpu:
            self.recorder = self._open_recorder()
            if self.recorder is None:  # no kernel records of kag's: the profiler records everything
                self.counter = None
        if self.counter is not None:
            self._start_counter()
            return
        self._start_profiler(gpu)

    @staticmethod
    def _open_recorder() -> Any:
        from kag.core.eval.candidate.kernel_records import KernelRecorder

        return KernelRecorder.open()

    def _start_counter(self) -> None:
        push = pop = 0
        if self.recorder is not None:
            import ctypes

            from kag.core.eval.candidate.kernel_records import EXTERNAL_KIND

            push = ctypes.cast(self.recorder.lib.cuptiActivityPushExternalCorrelationId, ctypes.c_void_p).value or 0
            pop = ctypes.cast(self.recorder.lib.cuptiActivityPopExternalCorrelationId, ctypes.c_void_p).value or 0
        failed = self.counter.start(push, pop, EXTERNAL_KIND if push else 0)
        if failed is None and self.recorder is not None:
            failed = self.recorder.start()
            if failed is None:
                self._mark_harness_thread()
        if failed:
            self.error = failed
            self.counter = self.recorder = None

    def _start_profiler(self, gpu: bool) -> None:
        from torch.profiler import ProfilerActivity, profile

        from kag.core.eval.candidate.profiler_events import all_threads, python_markers, quiet_stderr

        activities = [ProfilerActivity.CPU]
        if gpu:
            # KAG_KERNEL_RECORDER=kag: kag's own recorder beside a CPU-only session
            self.recorder = self._open_recorder() if os.environ.get("KAG_KERNEL_RECORDER") == "kag" else None
            if self.recorder is None:  # the profiler records the kernels
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
            self._mark_harness_thread()

    def _mark_harness_thread(self) -> None:
        """A launch of the harness's own, under the recorder's mark: which thread is the harness's."""
        import torch

        from kag.core.eval.candidate.kernel_records import MARK

        self.recorder.push(MARK)
        torch.zeros(1, device=self.device)
        self.recorder.pop()

    def enter_call(self) -> None:
        """Before one call of forward (the operators from here to ``exit_call`` are the solution's);
        the kernel recorder's id for the call is pushed until then."""
        self.calls += 1
        if self.recorder is not None:
            self.call_window.append(self.windows)
        if self.counter is not None:
            self.counter.begin(self.calls if self.recorder is not None else 0, 0)
            return
        if self.recorder is not None:
            self.recorder.push(self.calls)
        if self._prof is not None:
            self._open = self._range_type(FORWARD_RANGE)
            self._open.__enter__()

    def exit_call(self) -> None:
        if self.counter is not None:
            self.counter.end()
            return
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None
        if self.recorder is not None:
            self.recorder.pop()

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """``enter_call``/``exit_call`` as a context (the harness calls them bare: a context costs a call
        its Python)."""
        self.enter_call()
        try:
            yield
        finally:
            self.exit_call()

    def enter_null(self) -> None:
        """As costly as ``enter_call``, around a null window's call (nothing in it): not a call of
        forward, so not counted among a window's calls."""
        if self.counter is not None:
            self.nulls += 1
            self.counter.begin(MARK_ID if self.recorder is not None else 0, 1)
        elif self._prof is not None:
            self._open = self._range_type(NULL_RANGE)
            self._open.__enter__()

    def exit_null(self) -> None:
        if self.counter is not None:
            self.counter.end()
        elif self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None

    def window_range(self) -> Any:
        """A context around the calls of one window."""
        self.windows += 1
        if self.counter is not None:
            return contextlib.nullcontext()
        return self._range(WINDOW_RANGE)

    @contextlib.contextmanager
    def post_range(self) -> Iterator[None]:
        """A context marking the hand-over of an output."""
        if self.counter is not None:
            self.counter.post(1)
            try:
                yield
            finally:
                self.counter.post(0)
            return
        with self._range(POST_RANGE):
            yield

    def _range(self, name: str) -> Any:
        if self._prof is None:
            return contextlib.nullcontext()
        return self._range_type(name)

    def stop(self) -> Observations:
        obs = Observations(calls=self.calls, error=self.error)
        if self.device.startswith("cuda") and self.kernels:
            obs.recorder = "kag" if self.recorder is not None else "profiler"
        obs.operators = "counter" if self.counter is not None else ("profiler" if self._prof is not None else "")
        records = None
        if self.recorder is not None:
            try:
                records = self.recorder.stop()
            except Exception as exc:  # noqa: BLE001
                obs.error = f"the kernel recorder failed: {type(exc).__name__}: {exc}"
            self.recorder = None
        if self.counter is not None:
            summarize_counts(self.counter.stop(), obs, self.nulls)
            self.counter = None
        elif self._prof is not None:
            from kag.core.eval.candidate.profiler_events import (python_markers, quiet_stderr, raw_events,
                                                                 summarize_events)

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
        else:
            return obs
        if records is not None:
            from kag.core.eval.candidate.kernel_records import summarize_records

            summarize_records(records, self.call_window, obs)
        return obs


def summarize_counts(counts: Any, obs: Observations, nulls: int = 0) -> None:
    """Fill ``obs`` from the operator counter's counts (kag.core.eval.candidate.op_counter.Counts) as
    ``summarize_events`` does from the profiler's: operators and torch.compile markers inside calls
    of forward or on any other thread, operators while an output was handed over. Each call marks
    its begin and end, and the calls and null calls begun and ended must be the harness's, exactly: fewer
    marks means the counter was blinded (its callback removed, or restarted), other counts that the
    solution began or ended calls of its own through the library's entry points."""
    if counts.error:
        obs.error = obs.error or counts.error
    elif (counts.markers != 2 * obs.calls or counts.broken or counts.calls_begun != obs.calls
          or counts.calls_ended != obs.calls or counts.nulls_begun != nulls or counts.nulls_ended != nulls):
        obs.error = obs.error or (
            f"the operator counter saw {counts.markers} of the {2 * obs.calls} marks of the {obs.calls} calls of "
            f"forward, calls begun/ended {counts.calls_begun}/{counts.calls_ended}, null calls "
            f"{counts.nulls_begun}/{counts.nulls_ended} of {nulls}, {counts.broken} out of order or from another "
            "thread (its callback was removed or restarted, or the solution drove it)")
    for table in (counts.call, counts.thread):
        for name, n in table.items():
            if name in HARNESS_RANGES:
                continue
            if name.startswith(("aten::", "prim::")):
                obs.ops[name] = obs.ops.get(name, 0) + n
            elif any(marker in name for marker in COMPILED_MARKERS) and name not in obs.compiled:
                obs.compiled.append(name)
    for name, n in counts.post.items():
        if name.startswith(("aten::", "prim::")) and name not in HARNESS_POST_OPS:
            obs.post_ops[name] = obs.post_ops.get(name, 0) + n
