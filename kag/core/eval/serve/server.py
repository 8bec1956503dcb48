"""The evaluation server (``kag serve``): the trusted evaluator as a long-lived service.

A one-shot ``kag score`` pays for a fresh judge: importing torch and torch._dynamo, which is most
of its latency on a GPU machine. A server keeps judges started ahead of need (``keep_judges_warm``)
and a GPU pool, as the paper's evaluation service does for its agents; ``kag score/verify/profile
--server SOCKET`` (or ``KAG_EVAL_SERVER``) send the task and the solution's files and get the same
``EvalResult`` back. Every evaluation still gets a fresh judge and a fresh candidate process: only
the interpreter start-up is done in advance, never anything that has seen solution code.

Protocol (kag.core.eval.serve.jsonsocket, one JSON object per line): ``{"op": "ping"}`` ->
``{"ok": true, ...}``; ``{"op": "evaluate", "task": Task, "solution": Solution, "options":
EvalOptions, "plugins": {kind: [names]}}`` -> ``{"result": EvalResult}``; a request the server
cannot take -> ``{"error": "..."}``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from kag import __version__
from kag.core.eval.serve.jsonsocket import JsonLineServer, json_request

ENV_VAR = "KAG_EVAL_SERVER"
MAX_REQUEST = 32 << 20  # a solution's files and the task's code


def default_socket_path() -> Path:
    """``/tmp/kag-<uid>/eval.sock``: a Unix socket path must stay under ~100 characters, so not
    under a deep cache directory; the folder is private to the user (0700)."""
    return Path("/tmp") / f"kag-{os.getuid()}" / "eval.sock"


class ServerError(Exception):
    """The server refused the request (bad input, unknown plugin) or could not be reached."""


class EvalServer:
    """Evaluate requests with judges kept warm. ``warm`` judges wait ready; evaluations run at
    once up to the pool's devices (the pool makes the rest wait for a GPU)."""

    def __init__(self, socket_path: str | Path | None = None, warm: int | None = None, pool: Any = None):
        from kag.core.eval.orchestrator.gpu_pool import default_pool
        from kag.core.eval.orchestrator.judge_process import keep_judges_warm

        self.pool = pool or default_pool()
        self.warm = warm if warm is not None else max(1, len(self.pool.devices))
        self.socket_path = Path(socket_path or default_socket_path())
        self.socket_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.socket_path.parent.stat().st_uid != os.getuid():
            raise ServerError(f"{self.socket_path.parent} belongs to another user; pass --socket in a folder of yours")
        self.started = time.time()
        self.served = 0
        self._plugins: dict[str, Any] = {}
        self._lock = threading.Lock()
        if self.warm:
            keep_judges_warm(self.warm)
        self._server = JsonLineServer(self.socket_path, self.handle, mode=0o600, max_request=MAX_REQUEST,
                                      name="kag-eval-server")

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            from kag.core.eval.orchestrator.judge_process import WARM

            started, ready = WARM.count_ready()
            return {"ok": True, "kag_version": __version__, "pid": os.getpid(), "served": self.served,
                    "uptime_s": round(time.time() - self.started, 1), "warm_judges_started": started,
                    "warm_judges_ready": ready, "devices": list(self.pool.devices)}
        if op != "evaluate":
            return {"error": f"unknown op {op!r}; use ping or evaluate"}
        try:
            task, solution, options, plugins = self.parse_request(request)
        except Exception as exc:  # noqa: BLE001 - bad input is the client's to fix
            return {"error": f"{type(exc).__name__}: {exc}"}
        from kag.core.records import to_dict

        return {"result": to_dict(self.run(task, solution, options, plugins))}

    def run(self, task: Any, solution: Any, options: Any, plugins: Any, **served_by: str) -> Any:
        """The EvalResult of one evaluation on this server's pool and warm judges (every front,
        the socket and HTTP, comes here); ``served_by`` joins ``metadata["eval_server"]``."""
        from kag.core.eval.orchestrator.evaluate import evaluate

        result = evaluate(task, solution, options, plugins, pool=self.pool)
        result.metadata["eval_server"] = {"pid": os.getpid(), "socket": str(self.socket_path), **served_by}
        with self._lock:
            self.served += 1
        return result

    def parse_request(self, request: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
        """(Task, Solution, EvalOptions, Plugins) from an evaluate request's JSON."""
        from kag.core.eval.orchestrator.evaluate import EvalOptions
        from kag.core.records import Solution, Task, from_dict

        task = from_dict(Task, request["task"])
        solution = from_dict(Solution, request["solution"])
        options = from_dict(EvalOptions, request.get("options") or {})
        return task, solution, options, self.plugins_for(request.get("plugins") or {})

    def plugins_for(self, selection: dict[str, Any]) -> Any:
        """The plugin manager for a selection ({kind: [names]}), built once per selection."""
        from kag.core.plugins import Plugins

        names = {str(k): [str(n) for n in v] for k, v in selection.items()}
        key = repr(sorted((k, tuple(v)) for k, v in names.items()))
        with self._lock:
            plugins = self._plugins.get(key)
            if plugins is None:
                plugins = self._plugins[key] = Plugins.from_names(names)
        return plugins

    def close(self) -> None:
        from kag.core.eval.orchestrator.judge_process import keep_judges_warm

        self._server.close()
        keep_judges_warm(0)


def evaluate_remote(socket_path: str | Path, task: Any, solution: Any, options: Any, plugins: Any,
                    timeout: float | None = None) -> Any:
    """The EvalResult of ``solution`` from the server at ``socket_path`` (what ``evaluate`` gives)."""
    from kag.core.records import EvalResult, from_dict, to_dict

    request = {"op": "evaluate", "task": to_dict(task), "solution": to_dict(solution),
               "options": attrs.asdict(options), "plugins": plugins.names_selected()}
    reply = _request(socket_path, request, timeout)
    if "result" not in reply:
        raise ServerError(f"the evaluation server at {socket_path} refused the request: {reply.get('error')}")
    return from_dict(EvalResult, reply["result"])


def ping(socket_path: str | Path, timeout: float = 5.0) -> dict[str, Any]:
    return _request(socket_path, {"op": "ping"}, timeout)


def _request(socket_path: str | Path, request: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    try:
        return json_request(socket_path, request, timeout=timeout)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise ServerError(f"no evaluation server at {socket_path} ({exc.strerror}); start one with "
                          f"`kag serve --socket {socket_path}`, or drop --server / unset {ENV_VAR}") from None
    except ConnectionError as exc:  # it went away mid-request (killed, crashed): no verdict was given
        raise ServerError(f"the evaluation server at {socket_path} stopped before answering ({exc}); no result "
                          f"was recorded: restart `kag serve --socket {socket_path}` and send it again") from None
