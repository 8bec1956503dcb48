"""Where a run's time goes: spans per worker, appended to a JSON-lines file (``kag eval --timeline``).

Evaluator side (trusted), diagnostics only: nothing here is ever read for a verdict. Enabled by
``KAG_TIMELINE=FILE``, which the judges inherit (their environment keeps it); every process appends
one line per span as it ends, in one ``write`` on an ``O_APPEND`` descriptor, so the lines of many
processes never interleave. A span's lane is the worker it belongs to: the episode a thread plays
(``in_lane``), else ``judge[pid]`` in a judge and ``main[pid]`` elsewhere. ``bench/scripts/scale.py
--timeline FILE`` draws the lanes as a picture; ``summarize`` sums each label's seconds.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from typing import Any, Iterator

ENV = "KAG_TIMELINE"
_local = threading.local()
_role = "main"
_fd: int | None = None
_fd_path: str | None = None
_fd_pid = -1  # a forked child opens its own descriptor
_lock = threading.Lock()
_serials = itertools.count()


def _thread_serial() -> int:
    """This thread's number, never reused in this process (thread idents are: a point of a new
    thread must not end a phase of a finished one)."""
    serial = getattr(_local, "serial", None)
    if serial is None:
        serial = _local.serial = next(_serials)
    return serial


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def set_role(role: str) -> None:
    """This process's default lane prefix ("judge" in a judge process)."""
    global _role
    _role = role


def lane() -> str:
    return getattr(_local, "lane", None) or f"{_role}[{os.getpid()}]"


def set_lane(name: str) -> None:
    """This thread's spans belong to lane ``name`` from now on (a judge, once it knows its worker)."""
    _local.lane = name


@contextlib.contextmanager
def in_lane(name: str | None) -> Iterator[None]:
    """Spans of this thread belong to lane ``name`` (an episode) until the block ends."""
    before = getattr(_local, "lane", None)
    _local.lane = name or before
    try:
        yield
    finally:
        _local.lane = before


def _write(record: dict[str, Any]) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    line = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
    with _lock:
        try:
            if _fd is None or _fd_path != path or _fd_pid != os.getpid():
                _reopen(path)
            os.write(_fd, line)  # type: ignore[arg-type]
        except OSError:
            pass  # a diagnostic: a full disk or a removed folder must never fail an evaluation


def _reopen(path: str) -> None:
    global _fd, _fd_path, _fd_pid
    _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    _fd_path, _fd_pid = path, os.getpid()


@contextlib.contextmanager
def span(label: str, **fields: Any) -> Iterator[None]:
    """Time the block as ``label`` in this thread's lane (nothing when the timeline is off)."""
    if not enabled():
        yield
        return
    start = time.time()
    try:
        yield
    finally:
        _write({**fields, "lane": lane(), "label": label, "start": round(start, 6),
                "end": round(time.time(), 6), "pid": os.getpid()})


def point(label: str, **fields: Any) -> None:
    """An instant in this thread's lane (the trace's marks)."""
    if enabled():
        now = round(time.time(), 6)
        _write({**fields, "lane": lane(), "label": label, "start": now, "end": now, "pid": os.getpid(),
                "thread": _thread_serial()})


def read(path: str) -> list[dict[str, Any]]:
    """The spans of a timeline file. Lines that do not parse (cut by a kill) or do not hold a span
    (string lane and label, numeric start and end) are skipped: the summary `kag eval` prints at
    its end must not fail on what another process appended."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and _is_span(row):
                rows.append(row)
    return rows


def _is_span(row: dict[str, Any]) -> bool:
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")

    return (isinstance(row.get("lane"), str) and isinstance(row.get("label"), str)
            and number(row.get("start")) and number(row.get("end")))


def phases(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spans as written, plus one per pair of consecutive points of a thread: the time up to a
    mark is the phase it ends (the judge's "checks done" ends its checks), in that mark's lane."""
    out = [r for r in rows if r["end"] > r["start"]]
    last: dict[tuple[Any, Any], dict[str, Any]] = {}
    for row in sorted((r for r in rows if r["end"] == r["start"]), key=lambda r: r["start"]):
        key = (row.get("pid"), row.get("thread"))
        before = last.get(key)
        if before is not None and row["start"] > before["start"]:
            out.append({**row, "start": before["start"], "end": row["start"], "point": True})
        last[key] = row
    return sorted(out, key=lambda r: r["start"])


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Seconds and count per label of ``phases(rows)``, largest first (spans nest: a build holds
    its compiles, so the sums overlap)."""
    totals: dict[str, dict[str, float]] = {}
    for row in phases(rows):
        if row["end"] > row["start"]:
            t = totals.setdefault(row["label"], {"seconds": 0.0, "count": 0})
            t["seconds"] += row["end"] - row["start"]
            t["count"] += 1
    return dict(sorted(((k, {"seconds": round(v["seconds"], 3), "count": int(v["count"])}) for k, v in totals.items()),
                       key=lambda kv: -kv[1]["seconds"]))
