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
REPORT_BYTES = 1 << 20


@attrs.define
class Counts:
    """One session's counts: by name inside calls of forward (harness's thread), on any other thread,
    during the hand-over of an output; ``markers``: the calls' own begin and end marks seen."""

    call: dict[str, int] = attrs.field(factory=dict)
    thread: dict[str, int] = attrs.field(factory=dict)
    post: dict[str, int] = attrs.field(factory=dict)
    markers: int = 0
    broken: int = 0  # calls begun inside a call or ended outside one (the harness never does either)


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
        size = self.lib.kag_counter_report(None, 0) + 1
        buf = ctypes.create_string_buffer(min(max(size, 64), REPORT_BYTES * 64))
        self.lib.kag_counter_report(buf, len(buf))
        counts = Counts()
        for line in buf.value.decode("utf-8", "replace").splitlines():
            place, _, rest = line.partition("\t")
            name, _, n = rest.rpartition("\t")
            try:
                value = int(n)
            except ValueError:
                continue
            if place == "markers":
                counts.markers = value
            elif place == "broken":
                counts.broken = value
            elif place in ("call", "thread", "post"):
                table = getattr(counts, place)
                table[name] = table.get(name, 0) + value
        return counts
