"""The candidate's half of the judge <-> candidate channel: its pickling and its output's redirection.

Untrusted side (runs in the candidate). Messages are pickled with torch's multiprocessing reductions
(``dumps``), so tensors travel as CUDA IPC handles or shared memory instead of copies. What the
candidate sends is unpickled by the judge with an allow-list (kag.core.eval.boundary
``restricted_loads``). ``redirect_output`` sends its stdout/stderr to the FIFO whose other end is the
judge's (kag.core.eval.judge.output_capture).
"""

from __future__ import annotations

import os
from typing import Any


def dumps(obj: Any) -> bytes:
    """Pickle with torch's reductions: tensors go as shared memory / CUDA IPC handles."""
    import torch.multiprocessing  # noqa: F401
    from multiprocessing.reduction import ForkingPickler

    return bytes(ForkingPickler.dumps(obj))


def redirect_output(fifo_path: str | None) -> None:
    """In the candidate: send fd 1 and 2 (and anything its children inherit) to the FIFO."""
    if not fifo_path:
        return
    fd = os.open(fifo_path, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
