"""A cooperative stop: the first Ctrl-C of a command that must not stop mid-way (a training step
half applied) asks its long loops to stop at their next safe point, where they save what a rerun
resumes from; a second Ctrl-C exits at once. Neither side of the trust boundary: plain control flow.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable

STOP = threading.Event()  # set on the first Ctrl-C; loops check it where stopping is safe


class StopRequested(KeyboardInterrupt):
    """Raised by a loop at its safe point after it saved its state."""


def stop_at_safe_points(announce: Callable[[], None]) -> Any:
    """Install the handler: the first SIGINT sets ``STOP`` and calls ``announce``, the second exits
    130. Returns the handler it replaced (to put back when the command is done)."""

    def handler(signum: int, frame: object) -> None:
        if STOP.is_set():
            os._exit(130)
        STOP.set()
        announce()

    STOP.clear()
    return signal.signal(signal.SIGINT, handler)
