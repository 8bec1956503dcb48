"""One JSON object per line over a Unix socket: a request, then its reply, per connection.

Shared by the evaluation bridge (skill scripts in a sandbox -> the episode's evaluator) and the
evaluation server (``kag serve``: any ``kag score`` -> judges kept warm). A thread per connection,
so a slow evaluation never blocks the next request from being read; the handler decides how many
run at once.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Any, Callable

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class SocketInUse(Exception):
    """Another live server answers on that path."""


class JsonLineServer:
    """Serve ``handler(request) -> reply`` on ``socket_path`` until ``close()``. A request that is
    not a JSON object, or a handler that raises, gets ``error_reply(message)``."""

    def __init__(self, socket_path: str | Path, handler: Handler, mode: int = 0o600, max_request: int = 64 * 1024,
                 name: str = "kag-json-socket", error_reply: Callable[[str], dict[str, Any]] | None = None):
        self.socket_path = Path(socket_path)
        self.handler = handler
        self.error_reply = error_reply or (lambda message: {"error": message})
        self.max_request = max_request
        if self.socket_path.exists():
            if _answers(self.socket_path):
                raise SocketInUse(f"{self.socket_path}: a server is already listening there")
            self.socket_path.unlink()  # left by a server that died
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.socket_path))
        os.chmod(self.socket_path, mode)
        self._server.listen(16)
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                data = read_line(conn, self.max_request)
                request = json.loads(data.decode() or "{}")
                if not isinstance(request, dict):
                    raise ValueError("a request is one JSON object")
                reply = self.handler(request)
            except Exception as exc:  # noqa: BLE001 - the server keeps serving whatever a request does
                reply = self.error_reply(f"{type(exc).__name__}: {exc}")
            try:
                conn.sendall((json.dumps(reply, default=str) + "\n").encode())
            except OSError:
                pass

    def close(self) -> None:
        self._closed = True
        try:
            self._server.close()
        finally:
            try:
                self.socket_path.unlink()
            except OSError:
                pass


def read_line(conn: socket.socket, limit: int | None = None) -> bytes:
    """Bytes up to and including the first newline (or the end of the stream)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            break
        if limit is not None and size > limit:
            raise ValueError(f"request over {limit} bytes")
    return b"".join(chunks)


def json_request(socket_path: str | Path, request: dict[str, Any], timeout: float | None = 3600) -> dict[str, Any]:
    """Client side: send one request, wait for its reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(socket_path))
        sock.sendall((json.dumps(request) + "\n").encode())
        data = read_line(sock)
    if not data.strip():
        raise ConnectionError(f"{socket_path}: the server closed the connection without a reply")
    return json.loads(data.decode())


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
            return True
        except OSError:
            return False
