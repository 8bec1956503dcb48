"""The judge's end of the candidate's stdout/stderr: a FIFO drained by a thread, its tail kept.

Trusted side (the judge process). The candidate's end is kag.core.eval.candidate.channel
``redirect_output``.
"""

from __future__ import annotations

import os
import select
import threading
from collections import deque

from kag.core import scratch

OUTPUT_TAIL_BYTES = 64 << 10


class OutputCapture:
    """A FIFO the candidate's stdout/stderr go to; a thread keeps only the last 64 KB.

    Draining continuously means a solution printing megabytes neither blocks nor fills a disk,
    and nothing it prints is ever parsed for a verdict.
    """

    def __init__(self, limit: int = OUTPUT_TAIL_BYTES, start: bool = True):
        self.dir = scratch.mkdtemp("kag-out-")
        self.path = os.path.join(self.dir, "output.fifo")
        os.mkfifo(self.path, 0o600)
        # O_RDWR keeps a writer open on our side, so reads never see EOF before the candidate opens it.
        self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)
        self.limit = limit
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="kag-output-capture", daemon=True)
        if start:
            self._thread.start()

    def start(self) -> None:
        """Start draining (separate from construction: the judge forks the candidate in between,
        and a fork must not happen while another thread runs)."""
        if not self._thread.is_alive():
            self._thread.start()

    def _read_available(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                return
            self.chunks.append(chunk)
            self.size += len(chunk)
            self.total += len(chunk)
            while self.size - len(self.chunks[0]) >= self.limit:
                self.size -= len(self.chunks.popleft())

    def _drain(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                self._read_available()

    def close(self) -> str:
        """Stop draining and return the tail (the text, with a note if it was truncated)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        self._read_available()
        os.close(self.fd)
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass
        data = b"".join(self.chunks)[-self.limit:]
        text = data.decode("utf-8", errors="replace")
        if self.total > len(data):
            text = f"[... {self.total - len(data)} earlier bytes dropped ...]\n" + text
        return text
