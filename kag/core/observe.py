"""What the candidate's calls did, as a profiler running through every one of them saw it.

``CallObserver`` runs in the candidate process (untrusted side): the judge starts it before the
first correctness check and stops it after the last timed call, so every call, checked or timed,
runs under the same hooks and a solution cannot tell a watched call from another. It records the
PyTorch operators that ran inside ``ModelNew.forward`` (Kineto's RecordFunction sees Python and
C++ callers alike), the GPU kernels launched (CUPTI) and torch.compile's markers.

``Observations`` is plain data; the judge's guard plugins read it (``check_observations``). It is
a report from an untrusted process: a policy signal, not a measurement. Timing and correctness
never depend on it (kag.core.judge_timing, kag.core.compare).
"""

from __future__ import annotations

import bisect
from typing import Any

import attrs

FORWARD_RANGE = "kag::forward"
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
    error: str | None = None


class CallObserver:
    """A profiler session spanning all of a candidate's calls; ``forward_range`` marks each call."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._prof: Any = None
        self.calls = 0
        self.error: str | None = None

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if self.device.startswith("cuda"):
            activities.append(ProfilerActivity.CUDA)
        try:
            self._prof = profile(activities=activities)
            self._prof.__enter__()
        except Exception as exc:  # noqa: BLE001 - the guards report that nothing was observed
            self._prof = None
            self.error = f"the profiler could not start: {type(exc).__name__}: {exc}"

    def forward_range(self) -> Any:
        """A context marking one call of forward (the ops inside it are the solution's)."""
        import contextlib

        from torch.autograd.profiler import record_function

        self.calls += 1
        return record_function(FORWARD_RANGE) if self._prof is not None else contextlib.nullcontext()

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


def summarize_events(events: list[Any], obs: Observations) -> None:
    """Fill ``obs`` from profiler events: operators and markers that start inside a forward range
    (any thread) or on any thread but the harness's (a thread the solution started works for it,
    whenever it runs), and every GPU kernel."""
    import torch

    cuda = torch.autograd.DeviceType.CUDA
    marks = [e for e in events if e.name == FORWARD_RANGE and e.device_type != cuda]
    ranges = sorted((e.time_range.start, e.time_range.end) for e in marks)
    starts = [r[0] for r in ranges]
    harness = {getattr(e, "thread", None) for e in marks}

    def inside(t: float) -> bool:
        i = bisect.bisect_right(starts, t) - 1
        return i >= 0 and ranges[i][0] <= t <= ranges[i][1]

    for e in events:
        if e.device_type == cuda:
            if e.name != FORWARD_RANGE:  # the range's own mark on the GPU timeline is not a kernel
                obs.kernels[e.name] = obs.kernels.get(e.name, 0) + 1
            continue
        name = e.name
        if name == FORWARD_RANGE or (getattr(e, "thread", None) in harness and not inside(e.time_range.start)):
            continue
        if name.startswith(("aten::", "prim::")):
            obs.ops[name] = obs.ops.get(name, 0) + 1
        elif any(marker in name for marker in COMPILED_MARKERS) and name not in obs.compiled:
            obs.compiled.append(name)
