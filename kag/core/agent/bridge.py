"""The evaluation bridge: how skill scripts inside a sandbox reach the trusted evaluator outside it.

The paper keeps the agent's CPU sandbox apart from the GPU pool that compiles and times. Here a
Unix socket, served by a thread of the (trusted) agent process and mounted into the sandbox, takes
one JSON request per connection (``{"action": "verify"}``) and answers with the report text and
exit status. The handler sees the workspace from the host side, so the sandbox never runs the
evaluator and a forged reply cannot reach the episode's record: results are recorded here.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

import attrs

from kag.core import scratch
from kag.core.eval.serve.jsonsocket import JsonLineServer, json_request
from kag.core.trust.isolation import socket_safe_tempdir

ACTIONS = ("compile", "verify", "profile")
ENV_VAR = "KAG_BRIDGE"
MAX_REQUEST = 64 * 1024


@attrs.define
class BridgeReply:
    output: str
    returncode: int = 0


Handler = Callable[[str, list[str]], BridgeReply]


class EvalBridge:
    """Serve ``handler(action, args)`` on a Unix socket until ``close()``.

    The handler may come after the bridge (``set_handler``): an episode's sandbox must be started
    with the bridge's directory before the evaluator that answers it can be made for its workspace.
    """

    def __init__(self, handler: Handler | None = None, directory: str | Path | None = None):
        self.handler = handler
        self.directory = Path(directory or scratch.mkdtemp("kag-bridge-", socket_safe_tempdir()))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket_path = self.directory / "eval.sock"
        self._lock = threading.Lock()  # one evaluation at a time per episode
        # 0o777: the sandbox user may differ from ours. A failing handler is an error reply, and
        # the bridge keeps serving.
        self._server = JsonLineServer(
            self.socket_path, self._answer, mode=0o777, max_request=MAX_REQUEST, name="kag-eval-bridge",
            error_reply=lambda message: attrs.asdict(BridgeReply(f"kag evaluator error: {message}", 1)))

    def set_handler(self, handler: Handler) -> None:
        """Answer every later request with ``handler``."""
        with self._lock:
            self.handler = handler

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        action = request.get("action")
        args = [str(a) for a in request.get("args", [])]
        if action not in ACTIONS:
            return attrs.asdict(BridgeReply(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}", 2))
        with self._lock:
            if self.handler is None:  # an error reply (error_reply above); the bridge keeps serving
                raise RuntimeError("no evaluator is answering yet")
            return attrs.asdict(self.handler(action, args))

    def close(self) -> None:
        self._server.close()

    def __enter__(self) -> "EvalBridge":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def request(socket_path: str, action: str, args: list[str] | None = None, timeout: float = 3600) -> BridgeReply:
    """Client side (the workspace's utils scripts carry their own copy, standard library only)."""
    reply = json_request(socket_path, {"action": action, "args": args or []}, timeout=timeout)
    return BridgeReply(reply["output"], int(reply["returncode"]))
