"""Timestamped phase marks for the evaluator's processes, printed to stderr when KAG_TRACE=1.

The judge's stderr reaches the caller; the candidate's goes to its captured output (the result's
``metadata.candidate_output``). Sorting both by time gives the timeline of one evaluation, which is
how the latency of ``kag score`` is profiled on a GPU machine (bench/evaluator.py --trace).
"""

from __future__ import annotations

import os
import sys
import time

ENABLED = os.environ.get("KAG_TRACE") == "1"


def mark(who: str, label: str) -> None:
    if ENABLED:
        sys.stderr.write(f"[kag-trace] {time.time():.3f} {who}[{os.getpid()}]: {label}\n")
        sys.stderr.flush()
