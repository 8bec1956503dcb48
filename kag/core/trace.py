"""Timestamped phase marks for the evaluator's processes, on stderr with ``kag -v`` or KAG_TRACE=1.

Marks go through ``logging`` (logger ``kag.trace``, level DEBUG), so a program embedding kag can
route them like any other log; ``kag -v`` sets KAG_TRACE=1, which every process of an evaluation
inherits (the judge's and the candidate's minimal environments keep it). The judge's stderr reaches
the caller; the candidate's goes to its captured output (the result's
``metadata.candidate_output``). Sorting both by time gives the timeline of one evaluation, which is
how the latency of ``kag score`` is profiled on a GPU machine (bench/scripts/evaluator.py --trace).
"""

from __future__ import annotations

import logging
import os
import sys

LOG = logging.getLogger("kag.trace")
ENABLED = False


def enable() -> None:
    """Print marks on stderr from now on, in this process and (KAG_TRACE=1) those it starts."""
    global ENABLED
    os.environ["KAG_TRACE"] = "1"
    if not ENABLED:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[kag-trace] %(created).3f %(message)s"))
        LOG.addHandler(handler)
        LOG.setLevel(logging.DEBUG)
        LOG.propagate = False
    ENABLED = True


def mark(who: str, label: str) -> None:
    """A phase reached: on stderr with ``-v``, and a point of the run's timeline when one is kept
    (kag.core.timeline: the time since the previous mark of a process is the phase it ends)."""
    if ENABLED:
        LOG.debug("%s[%d]: %s", who, os.getpid(), label)
    if os.environ.get("KAG_TIMELINE"):
        from kag.core import timeline

        timeline.point(f"{who}: {label}")


if os.environ.get("KAG_TRACE") == "1":
    enable()
