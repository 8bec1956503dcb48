"""What crosses the boundary between the judge and its candidate, typed: what the orchestrator asks of
a judge (``JudgeSpec``), what the judge tells its candidate (``CandidateSpec``), what the judge
answers (``JudgeReport``), the doorbell's words, and the judge's unpickler of what a candidate sends.

Trusted side, except ``CandidateSpec`` and the doorbell's words: the one record the candidate
process receives, and the only fields of a task it is told (never the seeds, the tolerance or the
baselines). Each record crosses its process boundary as ``kag.core.records.to_dict`` data and is
rebuilt with ``from_dict``, so a field added on one side and not the other is an error, not a
silent loss. The candidate's package (kag.core.eval.candidate) imports from kag.core.eval only this
module (tests/core/eval/test_eval_layout.py).

What the candidate sends is unpickled by the judge (``restricted_loads``) with an allow-list: plain
containers, numbers, strings, and tensors whose class is exactly ``torch.Tensor``. A tensor
subclass, a custom object or anything that would import the candidate's code in the judge is
refused, so the trusted side never runs untrusted code.
"""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any

import attrs

from kag.core.records import TimingStats


@attrs.define
class Timeouts:
    """Wall-clock limits in seconds per phase."""

    build_s: float = 180.0  # one compile bomb must not hold a worker for long
    baseline_s: float = 900.0
    load_s: float = 120.0
    check_s: float = 120.0
    timing_s: float = 600.0


@attrs.define(kw_only=True)
class MeasureSettings:
    """How one evaluation measures, asked by the orchestrator (``EvalOptions``) and carried to the
    judge (``JudgeSpec``): declared once here, copied across by ``measure_settings``."""

    num_checks: int = 5
    num_timed: int = 100
    warmup: int = 10
    seed: int | None = None  # None: a secret seed the judge draws itself, per evaluation
    do_correctness: bool = True
    do_timing: bool = True
    timeouts: Timeouts = attrs.field(factory=Timeouts)
    cache_dir: str | None = None
    use_baseline_cache: bool = True


def measure_settings(settings: MeasureSettings) -> dict[str, Any]:
    """``settings``' own fields as keywords for another ``MeasureSettings`` (its timeouts a copy)."""
    out = {f.name: getattr(settings, f.name) for f in attrs.fields(MeasureSettings)}
    out["timeouts"] = attrs.evolve(settings.timeouts)
    return out


@attrs.define
class CandidateSpec:
    """What the candidate needs to build ModelNew (and the baseline runner, the task's Model)."""

    task_code: str
    task_path: str
    init_seed: int
    model_new_path: str
    module_dir: str | None = None


@attrs.define
class JudgeSpec(MeasureSettings):
    """One evaluation as the judge runs it (and how it measures: ``MeasureSettings``)."""

    task_code: str
    task_path: str
    task_hash: str
    device: str
    backend: str
    model_new_path: str
    tolerance: str
    init_seed: int
    module_dir: str | None = None
    baselines: list[tuple[str, str]] = attrs.field(factory=list)  # (baseline name, compile mode)
    trace_lane: str = ""  # the orchestrator's worker (kag.core.timeline): the judge's phases join its lane
    runtime_guards: list[str] = attrs.field(factory=list)
    guard_options: dict[str, Any] = attrs.field(factory=dict)
    plugin_selection: dict[str, Any] = attrs.field(factory=dict)
    plugin_builtins: list[str] = attrs.field(factory=list)
    extension_path: str | None = None
    host_memory_bytes: int | None = None
    visible_devices: str | None = None  # the GPU the pool lent, set when the judge is handed the spec
    timing_slot: str | None = None  # the machine-wide timing slot (kag.core.eval.orchestrator.timing_lock): "cpu", "gpu-<id>"
    lock_dir: str | None = None  # where the slot's lock lives (None: kag.core.eval.orchestrator.timing_lock.lock_dir())

    def candidate(self) -> CandidateSpec:
        return CandidateSpec(task_code=self.task_code, task_path=self.task_path, init_seed=self.init_seed,
                             model_new_path=self.model_new_path, module_dir=self.module_dir)

    def run_budget_s(self) -> float:
        """The orchestrator's overall deadline for the judge's answer."""
        t = self.timeouts
        return (t.baseline_s * max(1, len(self.baselines)) + 2 * t.load_s + self.num_checks * t.check_s
                + t.timing_s + 120.0)


@attrs.define
class JudgeReport:
    """The judge's verdict and measurements; ``kag.core.eval.orchestrator.evaluate`` folds it into an EvalResult."""

    correct: bool = False
    error: str | None = None
    error_kind: str | None = None
    judge_error: bool = False  # the judge itself failed (reference model, evaluator), not the candidate
    violations: list[dict[str, str]] = attrs.field(factory=list)  # {"guard", "detail"}
    times_ms: dict[str, float] = attrs.field(factory=dict)
    timing: dict[str, TimingStats] = attrs.field(factory=dict)
    device: dict[str, Any] = attrs.field(factory=dict)
    peak_memory_mb: float | None = None  # as the candidate reports it: shown, never scored
    durations_s: dict[str, float] = attrs.field(factory=dict)
    baseline_cache: dict[str, Any] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)
    candidate_output: str = ""
    confinement: list[str] = attrs.field(factory=list)
    calibration: dict[str, Any] = attrs.field(factory=dict)
    observed: dict[str, Any] = attrs.field(factory=dict)
    rechecked_calls: int = 0
    timing_load: dict[str, Any] = attrs.field(factory=dict)  # each timed phase's TimingConditions

    def fail(self, kind: str, error: str, judge_error: bool = False) -> None:
        self.correct, self.error_kind, self.error, self.judge_error = False, kind, error, judge_error

    def violation(self, guard: str, detail: str) -> None:
        self.violations.append({"guard": guard, "detail": detail})

    # what evaluate copies into EvalResult.metadata when present
    METADATA = ("baseline_cache", "notes", "candidate_output", "judge_error", "confinement", "calibration",
                "observed", "rechecked_calls", "timing_load")


# ---------------------------------------------------------------------------------------------
# the doorbell's words (kag.core.eval.candidate.candidate's protocol)
OP_CALL, OP_NULL, OP_MSG, OP_END = 1, 2, 3, 4
WORD = struct.Struct("<Q")
COUNT = struct.Struct("<I")  # the length of a done word's tail, and counts inside it
EXTENT = struct.Struct("<QQ")  # address, bytes of one output tensor in this process's memory (CPU)
MAX_CALLS = (1 << 24) - 1  # calls in one window (the word's field)


def pack(op: int, calls: int = 0, serial: int = 0) -> bytes:
    if not 0 <= calls <= MAX_CALLS:
        raise ValueError(f"a window holds at most {MAX_CALLS} calls")
    return WORD.pack(op | (calls << 8) | ((serial & 0xFFFFFFFF) << 32))


def unpack(data: bytes) -> tuple[int, int]:
    """(op, calls) of a doorbell word."""
    word = WORD.unpack(data)[0]
    return word & 0xFF, (word >> 8) & MAX_CALLS


# ---------------------------------------------------------------------------------------------
# the judge's unpickler of what the candidate sends
MAX_MESSAGE_BYTES = 256 << 20

_REDUCTIONS = "torch.multiprocessing.reductions"
_ALLOWED: set[tuple[str, str]] = {
    (_REDUCTIONS, name)
    for name in ("rebuild_tensor", "rebuild_cuda_tensor", "rebuild_typed_storage", "rebuild_storage_fd",
                 "rebuild_storage_filename", "rebuild_storage_empty", "rebuild_typed_storage_child")
} | {
    ("torch.storage", "UntypedStorage"), ("torch.storage", "TypedStorage"),
    ("torch", "UntypedStorage"), ("torch", "TypedStorage"), ("torch", "Size"), ("torch", "Tensor"),
    ("torch", "device"), ("multiprocessing.resource_sharer", "DupFd"), ("collections", "OrderedDict"),
    ("builtins", "complex"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice"),
}


class RefusedObject(Exception):
    """The candidate sent something that is not plain data or an exact ``torch.Tensor``."""


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED or (module == "torch" and _is_dtype(name)):
            return super().find_class(module, name)
        raise RefusedObject(
            f"the candidate sent a {module}.{name} object; outputs must be plain torch.Tensor "
            f"(no subclasses, no custom classes) or tuples/lists/dicts of them"
        )


def _is_dtype(name: str) -> bool:
    import torch

    return isinstance(getattr(torch, name, None), torch.dtype)


def restricted_loads(data: bytes) -> Any:
    """Unpickle a candidate's message without ever importing or calling the candidate's code."""
    import torch.multiprocessing  # noqa: F401 - registers the tensor reductions

    return _RestrictedUnpickler(io.BytesIO(data)).load()
