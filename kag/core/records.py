"""Records that cross boundaries (processes, files, plugins): attrs classes with lossless JSON.

``to_dict``/``from_dict`` walk the attrs fields and their type hints, so adding a field to a
record is all it takes for it to travel. ``to_json``/``from_json`` are the string forms.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import types
import typing
from pathlib import Path
from typing import Any, Iterator, TypeVar, Union

import attrs

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------
# serialisation
def to_dict(record: Any) -> Any:
    """Plain JSON-able data for a record (or a list/dict of records)."""
    if attrs.has(type(record)):
        return {f.name: to_dict(getattr(record, f.name)) for f in attrs.fields(type(record))}
    if isinstance(record, (list, tuple)):
        return [to_dict(x) for x in record]
    if isinstance(record, dict):
        return {str(k): to_dict(v) for k, v in record.items()}
    return record


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        for arg in args:
            if attrs.has(arg) and isinstance(value, dict):
                return from_dict(arg, value)
        return _convert(args[0], value) if len(args) == 1 else value
    if attrs.has(tp):
        return from_dict(tp, value)
    if origin in (list, tuple):
        (arg, *_) = typing.get_args(tp) or (Any,)
        items = [_convert(arg, v) for v in value]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        _, arg = typing.get_args(tp) or (Any, Any)
        return {k: _convert(arg, v) for k, v in value.items()}
    return value


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a record from ``to_dict`` output; unknown keys are an error (no silent loss)."""
    attrs.resolve_types(cls)
    fields = {f.name: f for f in attrs.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    kwargs = {name: _convert(fields[name].type, value) for name, value in data.items()}
    return cls(**kwargs)


def to_json(record: Any) -> str:
    return json.dumps(to_dict(record), sort_keys=False)


def from_json(cls: type[T], text: str) -> T:
    return from_dict(cls, json.loads(text))


# ---------------------------------------------------------------------------------------------
# JSONL files: results, trajectories and pipeline records are appended as they happen, and a run
# may be killed mid-write; these two are the only code that writes or reads such a file.
class JsonlError(ValueError):
    """A JSONL line that is not valid JSON and is not a torn last line; names file:line."""


def append_jsonl(path: str | Path, *records: Any) -> None:
    """Append records (attrs records or plain JSON data), one line each, under an exclusive ``flock``,
    first cutting off a torn last line a killed writer left; every line is flushed as it is written
    and the file synced at the end. With no records it only makes sure the file exists."""
    path = Path(path)
    lines = [to_json(record).encode() + b"\n" for record in records]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            size = fh.seek(0, os.SEEK_END)
            if size:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":  # a writer died mid-line: drop the fragment
                    fh.seek(0)
                    fh.truncate(fh.read().rfind(b"\n") + 1)
            fh.seek(0, os.SEEK_END)
            for line in lines:
                fh.write(line)
                fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` per non-blank line. A last line without its newline that does not
    parse is a killed writer's fragment and is skipped (``append_jsonl`` cuts it off); any other
    bad line raises ``JsonlError``: data is never dropped silently."""
    raw = Path(path).read_bytes()
    lines = raw.split(b"\n")
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            if n == len(lines):  # no newline after it: possibly torn
                return
            raise JsonlError(f"{path}:{n}: not valid JSON ({exc}); remove or fix that line") from None
        yield n, value


def read_jsonl(path: str | Path) -> list[Any]:
    """Every value of a JSONL file (see ``iter_jsonl``); [] when the file does not exist yet."""
    return [value for _, value in iter_jsonl(path)] if Path(path).exists() else []


# ---------------------------------------------------------------------------------------------
# tasks and solutions
@attrs.define
class Task:
    """A PyTorch ``Model`` with ``get_inputs``/``get_init_inputs`` (KernelBench format)."""

    name: str
    source: str
    code: str
    level: int | None = None
    problem_id: int | None = None
    path: str | None = None
    metadata: dict[str, Any] = attrs.field(factory=dict)

    @property
    def code_hash(self) -> str:
        """Content hash: baseline timings are cached by it."""
        return hashlib.sha256(self.code.encode()).hexdigest()[:16]


@attrs.define
class Solution:
    """What the agent wrote: ``model_new.py`` and the files under ``kernels/``."""

    model_new: str
    kernels: dict[str, str] = attrs.field(factory=dict)
    ignored_files: list[str] = attrs.field(factory=list)


# ---------------------------------------------------------------------------------------------
# evaluation
@attrs.define
class Violation:
    """A guard's finding: which guard, and where (file:line or kernel name) and what."""

    guard: str
    detail: str


@attrs.define
class TimingStats:
    """Summary of N timed iterations, in milliseconds."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    iqr_ms: float
    n: int
    # what a window of no calls took on a GPU, by the timing's long and short windows to the moment their
    # calls' work was done (kag.core.eval.judge.judge_timing ``drained_intercept_s``): the task's own per-window
    # cost, which a baseline's timing lends the bound on the candidate's (``intercept_cap``)
    intercept_ms: float | None = None
    # where a window holds one call (the CPU): the median of the timing's null windows (a call of nothing
    # through the runner's path), which bounds the candidate's null base beside the runner's null windows
    # timed after the candidate's (kag.core.eval.judge.judge_timing ``null_base_cap``)
    null_ms: float | None = None

    @property
    def cv(self) -> float:
        return self.std_ms / self.mean_ms if self.mean_ms else 0.0


@attrs.define
class RewardValue:
    name: str
    value: float


@attrs.define
class EvalResult:
    """The trusted evaluator's verdict on one solution for one task."""

    task: str
    backend: str = "cuda"
    compiled: bool = False
    correct: bool = False
    violations: list[Violation] = attrs.field(factory=list)
    error: str | None = None
    error_kind: str | None = None
    times_ms: dict[str, float] = attrs.field(factory=dict)
    timing: dict[str, TimingStats] = attrs.field(factory=dict)
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    reward: RewardValue | None = None
    device: dict[str, Any] = attrs.field(factory=dict)
    peak_memory_mb: float | None = None  # on a GPU, as the candidate reports it (shown, never scored)
    durations_s: dict[str, float] = attrs.field(factory=dict)
    build_log: str = ""
    metadata: dict[str, Any] = attrs.field(factory=dict)

    @property
    def ok(self) -> bool:
        """Built, guarded and correct: the solution counts."""
        return self.compiled and self.correct and not self.violations and self.error is None


# ---------------------------------------------------------------------------------------------
# trajectories
@attrs.define
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class Message:
    """One chat message in the OpenAI format (tool calls and tool results included)."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = attrs.field(factory=list)
    tool_call_id: str | None = None
    name: str | None = None


@attrs.define
class Turn:
    """One policy step: what the model produced, what the tools answered, and RL data if any."""

    index: int
    response: Message
    observations: list[Message] = attrs.field(factory=list)
    prompt_token_ids: list[int] = attrs.field(factory=list)
    response_token_ids: list[int] = attrs.field(factory=list)
    response_logprobs: list[float] = attrs.field(factory=list)
    eval_results: list[EvalResult] = attrs.field(factory=list)
    usage: dict[str, int] = attrs.field(factory=dict)
    elapsed_s: float = 0.0
    error: str | None = None
    tool_errors: int = 0  # of this turn's tool calls, those that failed (a timeout counts in both)
    tool_timeouts: int = 0


@attrs.define
class Trajectory:
    """One episode: the task, every turn, the best solution's verdict and the reward."""

    episode_id: str
    task: str
    messages: list[Message] = attrs.field(factory=list)
    turns: list[Turn] = attrs.field(factory=list)
    result: EvalResult | None = None
    reward: float | None = None
    stop_reason: str = ""
    policy: str = ""
    plugins: dict[str, list[str]] = attrs.field(factory=dict)
    kag_version: str = ""
    elapsed_s: float = 0.0
    metadata: dict[str, Any] = attrs.field(factory=dict)

    def tool_counts(self) -> dict[str, int]:
        """Tool calls over the episode, how many failed and how many of those timed out: a run
        whose compile.sh timed out every time says so, whatever its final verdict."""
        return {"calls": sum(len(t.response.tool_calls) for t in self.turns),
                "errors": sum(t.tool_errors for t in self.turns),
                "timeouts": sum(t.tool_timeouts for t in self.turns)}
