"""The operator counter as the harness drives it (untrusted side: this runs in the candidate and in
the baseline runner, alike).

The judge loads the library (kag.core.eval.judge.op_counter_lib) before it forks them and leaves it
in ``LOADED``; ``OpCounter`` starts its callback on the harness's thread, marks each call of forward
(``begin``/``end``, which also push and pop the kernel recorder's id for it) and the hand-over of an
output (``post``), and reads the counts back at the end. What it counts is a report from an
untrusted process, as torch.profiler's was: the solution can remove the callback (then the calls'
own markers go missing and the observer says so) or switch RecordFunction off around its own
operators, as it could under the profiler.
"""

from __future__ import annotations

import ctypes
from typing import Any

import attrs

LOADED: Any = None  # the judge's ctypes.CDLL of the library, inherited through the fork; None: not loaded
REPORT_BYTES = 64 << 20  # more is not a report the harness made


@attrs.define
class Counts:
    """One session's counts: by name inside calls of forward (harness's thread), on any other thread,
    during the hand-over of an output; the calls' own marks seen (``markers``: a begin and an end a call,
    through RecordFunction), calls and null calls begun and ended through the entry points, and entry
    points used out of order or from another thread (``broken``: the harness never does). ``error``: the
    report could not be read whole."""

    call: dict[str, int] = attrs.field(factory=dict)
    thread: dict[str, int] = attrs.field(factory=dict)
    post: dict[str, int] = attrs.field(factory=dict)
    markers: int = 0
    calls_begun: int = 0
    calls_ended: int = 0
    nulls_begun: int = 0
    nulls_ended: int = 0
    broken: int = 0
    error: str | None = None


TOTALS = ("markers", "calls_begun", "calls_ended", "nulls_begun", "nulls_ended", "broken")


def parse_report(text: str) -> Counts:
    """The library's report: its totals, one line per name and place, and an end line with the count of
    the lines before it. Names reach here with control and non-ASCII characters replaced."""
    counts = Counts()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or not lines[-1].startswith("end\t\t"):
        counts.error = "the operator counter's report has no end line"
        return counts
    try:
        expected = int(lines[-1][5:])
    except ValueError:
        expected = -1
    if expected != len(lines) - 1:
        counts.error = f"the operator counter's report has {len(lines) - 1} lines, its end line says {expected}"
        return counts
    for line in lines[:-1]:
        place, _, rest = line.partition("\t")
        name, _, n = rest.rpartition("\t")
        try:
            value = int(n)
        except ValueError:
            value = -1
        if value < 0:
            counts.error = f"the operator counter's report has an unreadable line: {line[:80]!r}"
            return counts
        if place in TOTALS and name == "":
            setattr(counts, place, value)
        elif place in ("call", "thread", "post"):
            table = getattr(counts, place)
            table[name] = table.get(name, 0) + value
        else:
            counts.error = f"the operator counter's report has an unknown line: {line[:80]!r}"
            return counts
    return counts


class OpCounter:
    """The loaded library's session, on the thread that calls ``start`` (the harness's)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        lib.kag_counter_start.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        lib.kag_counter_start.restype = ctypes.c_int
        lib.kag_call_begin.argtypes = [ctypes.c_uint64, ctypes.c_int]
        lib.kag_call_begin.restype = None
        lib.kag_call_end.argtypes = []
        lib.kag_call_end.restype = None
        lib.kag_post.argtypes = [ctypes.c_int]
        lib.kag_post.restype = None
        lib.kag_counter_report.argtypes = [ctypes.c_char_p, ctypes.c_long]
        lib.kag_counter_report.restype = ctypes.c_long
        self.begin = lib.kag_call_begin  # (id, null): bound once, called on every call
        self.end = lib.kag_call_end
        self.post = lib.kag_post

    @classmethod
    def loaded(cls) -> "OpCounter | None":
        return cls(LOADED) if LOADED is not None else None

    def start(self, push: int = 0, pop: int = 0, kind: int = 0) -> str | None:
        """The callback on; ``push``/``pop``: CUPTI's external-correlation entry points (addresses)
        the calls' marks drive, 0 for none. An error (a sentence) where it did not start."""
        if self.lib.kag_counter_start(push or None, pop or None, kind) != 0:
            return "the operator counter's callback was refused"
        return None

    def stop(self) -> Counts:
        self.lib.kag_counter_stop()
        for _ in range(3):  # the report may grow between asking its size and reading it (other threads)
            size = self.lib.kag_counter_report(None, 0)
            if size < 0 or size > REPORT_BYTES:
                return Counts(error=f"the operator counter's report is {size} bytes")
            buf = ctypes.create_string_buffer(size + 4096)
            n = self.lib.kag_counter_report(buf, len(buf))
            if n < len(buf):
                return parse_report(buf.raw[:n].decode("ascii", "replace"))
        return Counts(error="the operator counter's report kept growing as it was read")
