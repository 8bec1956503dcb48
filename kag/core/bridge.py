"""The evaluation bridge: how skill scripts inside a sandbox reach the trusted evaluator outside it.

The paper keeps the agent's CPU sandbox apart from the GPU pool that compiles and times. Here a
Unix socket, served by a thread of the (trusted) agent process and mounted into the sandbox, takes
one JSON request per connection (``{"action": "verify"}``) and answers with the report text and
exit status. The handler sees the workspace from the host side, so the sandbox never runs the
evaluator and a forged reply cannot reach the episode's record: results are recorded here.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import Callable

import attrs

ACTIONS = ("compile", "verify", "profile")
ENV_VAR = "KAG_BRIDGE"
MAX_REQUEST = 64 * 1024


@attrs.define
class BridgeReply:
    output: str
    returncode: int = 0


Handler = Callable[[str, list[str]], BridgeReply]


class EvalBridge:
    """Serve ``handler(action, args)`` on a Unix socket until ``close()``."""

    def __init__(self, handler: Handler, directory: str | Path | None = None):
        self.handler = handler
        self.directory = Path(directory or tempfile.mkdtemp(prefix="kag-bridge-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket_path = self.directory / "eval.sock"
        if self.socket_path.exists():
            self.socket_path.unlink()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o777)  # the sandbox user may differ from ours
        self._server.listen(8)
        self._lock = threading.Lock()  # one evaluation at a time per episode
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="kag-eval-bridge", daemon=True)
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
                data = b""
                while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                request = json.loads(data.decode() or "{}")
                action = request.get("action")
                args = [str(a) for a in request.get("args", [])]
                if action not in ACTIONS:
                    reply = BridgeReply(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}", 2)
                else:
                    with self._lock:
                        reply = self.handler(action, args)
            except Exception as exc:  # the bridge must keep serving whatever a request does
                reply = BridgeReply(f"kag evaluator error: {type(exc).__name__}: {exc}", 1)
            try:
                conn.sendall((json.dumps(attrs.asdict(reply)) + "\n").encode())
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

    def __enter__(self) -> "EvalBridge":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def request(socket_path: str, action: str, args: list[str] | None = None, timeout: float = 3600) -> BridgeReply:
    """Client side (used by the workspace's utils scripts): send one request, wait for the reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(socket_path)
        sock.sendall((json.dumps({"action": action, "args": args or []}) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data.decode())
    return BridgeReply(reply["output"], int(reply["returncode"]))
