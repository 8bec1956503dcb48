"""The evaluation server's HTTP front (``kag serve --http HOST:PORT``): the same warm judges and
GPU pool as the Unix socket, for RL stacks on other machines.

Endpoints (JSON in, JSON out):

- ``POST /get_reward``: OpenRLHF's remote reward model protocol (``--remote_rm_url``). In:
  ``{"query": [str], "prompts": [str], "labels": [str]}`` (a query is the prompt followed by the
  model's answer, as OpenRLHF decodes it); out: ``{"rewards": [float], "scores": [float],
  "extra_logs": {name: [float]}}`` plus ``error_kinds`` and ``errors`` (one per query, null when
  it passed). ``extra_logs`` holds numbers only (OpenRLHF makes tensors of them): ``correct``,
  ``speedup_vs_eager``, ``speedup_vs_compile`` (0 when not timed) and ``error_<kind>`` (1 or 0)
  for each kind of failure: parse, build, guard, mismatch, timeout, crash, cuda_error, oom,
  exception. A label names the task: a dataset id such as ``kernelbench:level1/19`` or a task file
  under a ``--task-root`` (kag.core.eval.serve.task_labels; nothing else on the server is read).
- ``POST /evaluate``: kag's own JSON, the socket protocol's request (``{"task": Task or label,
  "solution": {"model_new": ..., "kernels": {...}}, "options": EvalOptions, "plugins": {...}}``)
  -> ``{"result": EvalResult}``; ``{"batch": [request, ...]}`` -> ``{"results": [...]}``.
- ``GET /health`` -> ``{"ok": true}`` (the one endpoint without a token); ``GET /ping``: the
  socket's ping (devices, warm judges, queue), which needs the token as every other endpoint does.

A request's evaluations fan out over a thread pool (``workers``) onto the server's GPU pool, which
gives each one a GPU alone while it checks and times. Evaluations admitted but not finished are the
queue: a request that would take it past ``max_queue`` gets 503 with ``Retry-After`` (seconds, from
the mean evaluation time). A client that goes away before its answer has its queued evaluations
dropped. A bearer token (``Authorization: Bearer T``, or ``?token=T`` for clients such as
OpenRLHF's that cannot set a header) is required whenever one is set, and one must be set to bind
anything but a loopback address.

Trusted side: completions are only parsed here (``parse_completion``, given by the caller) and
every solution is judged by ``kag.core.eval.orchestrator.evaluate`` in a fresh judge and candidate; a label
resolves only inside the task roots and datasets the server was started with, a client's
``options.cache_dir`` is refused (the server's cache is its own), and the token guards what the
server will run as a reference (an inline task's code), as the socket's file mode does.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hmac
import ipaddress
import json
import logging
import math
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from kag.core.eval.orchestrator.evaluate import ERROR_KINDS
from kag.core.eval.serve.server import MAX_REQUEST, ServerError

TOKEN_ENV = "KAG_SERVE_TOKEN"
PARSE_ERROR = "parse"
REWARD_ERROR_KINDS = (PARSE_ERROR,) + ERROR_KINDS
log = logging.getLogger("kag.http")


class HttpError(Exception):
    """A request the front answers with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.headers = status, headers or {}


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``PORT`` (on 127.0.0.1) -> (host, port); port 0 picks one."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise ServerError(f"--http {text!r}: give HOST:PORT, e.g. 127.0.0.1:8000 or 0.0.0.0:8000 (with --token)")
    return host or "0.0.0.0", number


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Admission:
    """Evaluations admitted and not yet finished, at most ``limit``; ``retry_after`` estimates
    when a refused request would fit, from the mean of the last evaluations' seconds."""

    def __init__(self, limit: int, workers: int):
        self.limit, self.workers, self.in_flight = limit, workers, 0
        self._seconds: collections.deque[float] = collections.deque(maxlen=32)
        self._lock = threading.Lock()

    def admit(self, n: int) -> None:
        with self._lock:
            if n > self.limit:
                raise HttpError(413, f"{n} evaluations in one request is over the queue limit ({self.limit}, "
                                     f"kag serve --max-queue); split the batch")
            if self.in_flight + n > self.limit:
                raise HttpError(503, f"the queue is full ({self.in_flight} evaluations for {self.limit} places); "
                                     f"retry later", {"Retry-After": str(self._retry_after())})
            self.in_flight += n

    def finished(self, seconds: float | None) -> None:
        with self._lock:
            self.in_flight -= 1
            if seconds is not None:
                self._seconds.append(seconds)

    def _retry_after(self) -> int:
        mean = sum(self._seconds) / len(self._seconds) if self._seconds else 10.0
        return max(1, math.ceil(mean * self.in_flight / max(1, self.workers)))


class HttpFront:
    """Serve ``server`` (an ``EvalServer``) over HTTP on ``bind`` until ``close()``.

    ``resolve_label(label) -> Task`` and ``parse_completion(query, prompt) -> Solution`` (raising
    ValueError when the answer holds no solution) come from the caller: the CLI knows the datasets
    and the answer format. ``reward_options`` (EvalOptions) and ``reward_plugins`` (a selection,
    {kind: [names]}) judge /get_reward's queries."""

    def __init__(self, server: Any, bind: tuple[str, int], token: str | None, max_queue: int, workers: int,
                 reward_options: Any, resolve_label: Callable[[str], Any],
                 parse_completion: Callable[[str, str], Any], reward_plugins: dict[str, Any] | None = None):
        host, port = bind
        if not token and not is_loopback(host):
            raise ServerError(f"--http {host}:{port} is reachable from other machines: set a bearer token with "
                              f"--token or {TOKEN_ENV}, or bind 127.0.0.1")
        self.server, self.token, self.reward_options = server, token, reward_options
        self.reward_plugins = dict(reward_plugins or {})
        self.resolve_label, self.parse_completion = resolve_label, parse_completion
        self.admission = Admission(max_queue, workers)
        self.executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="kag-http-eval")
        self._tasks: dict[str, Any] = {}
        self._tasks_lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"front": self})
        try:
            server_class = _Server6 if ":" in host else _Server
            self.httpd = server_class((host, port), handler)
        except OSError as exc:
            raise ServerError(f"--http {host}:{port}: cannot listen there ({exc.strerror}); pick another port") from None
        self.url = f"http://{host if ':' not in host else f'[{host}]'}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="kag-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.executor.shutdown(wait=True, cancel_futures=True)

    def authorized(self, headers: Any, query: dict[str, list[str]]) -> bool:
        if not self.token:
            return True
        given = headers.get("Authorization", "")
        given = given[7:].strip() if given[:7].lower() == "bearer " else (query.get("token") or [""])[0]
        return hmac.compare_digest(given.encode(), self.token.encode())

    def task(self, label: Any, where: str) -> Any:
        """The task a label names (cached: a training run sends the same labels again and again)."""
        if not isinstance(label, str) or not label:
            raise HttpError(400, f"{where}: a label is a task file or an id like kernelbench:level1/19, got {label!r}")
        with self._tasks_lock:
            if label in self._tasks:
                return self._tasks[label]
        try:
            task = self.resolve_label(label)
        except Exception as exc:  # noqa: BLE001 - a label that names no task is the client's to fix
            reason = str(exc).removeprefix(f"--task {label!r}: ")
            raise HttpError(400, f"{where} {label!r}: {reason}") from None
        with self._tasks_lock:
            self._tasks[label] = task
        return task

    def fan_out(self, jobs: list[tuple[Any, Any, Any, Any]], gone: Callable[[], bool]) -> list[Any]:
        """EvalResults of (task, solution, options, plugins) jobs, run at once on the pool; the
        ones not started yet are dropped when ``gone()`` says the client left."""
        self.admission.admit(len(jobs))
        futures = []
        for job in jobs:
            try:
                futures.append(self.executor.submit(self._run, *job))
            except RuntimeError:  # the executor is shutting down: give back the places not taken
                for _ in range(len(jobs) - len(futures)):
                    self.admission.finished(None)
                raise HttpError(503, "the server is stopping", {"Retry-After": "5"}) from None
        pending = set(futures)
        while pending:
            _, pending = concurrent.futures.wait(pending, timeout=0.25)
            if pending and gone():
                for future in pending:
                    if future.cancel():
                        self.admission.finished(None)
                raise ClientGone()
        return [f.result() for f in futures]

    def _run(self, task: Any, solution: Any, options: Any, plugins: Any) -> Any:
        start, seconds = time.monotonic(), None
        try:
            result = self.server.run(task, solution, options, plugins, http=self.url)
            seconds = time.monotonic() - start
            return result
        finally:
            self.admission.finished(seconds)

    def get_reward(self, body: dict[str, Any], gone: Callable[[], bool]) -> dict[str, Any]:
        queries = _strings(body, "query")
        labels = _strings(body, "labels")
        prompts = _strings(body, "prompts") if body.get("prompts") is not None else [""] * len(queries)
        if not len(queries) == len(labels) == len(prompts):
            raise HttpError(400, f"query, prompts and labels differ in length ({len(queries)}, {len(prompts)}, "
                                 f"{len(labels)}); send one label and one prompt per query")
        tasks = [self.task(label, f"labels[{i}]") for i, label in enumerate(labels)]
        plugins = self.server.plugins_for(self.reward_plugins)
        results: list[Any] = [None] * len(queries)
        jobs, where = [], []
        for i, (query, prompt, task) in enumerate(zip(queries, prompts, tasks)):
            try:
                jobs.append((task, self.parse_completion(query, prompt), self.reward_options, plugins))
                where.append(i)
            except ValueError as exc:
                results[i] = unparsed_result(task, self.reward_options, plugins, str(exc))
        for i, result in zip(where, self.fan_out(jobs, gone)):
            results[i] = result
        return reward_reply(results)

    def evaluate(self, body: dict[str, Any], gone: Callable[[], bool]) -> dict[str, Any]:
        from kag.core.records import to_dict

        batch = body.get("batch")
        items = batch if isinstance(batch, list) else [body]
        jobs = []
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise HttpError(400, f"batch[{i}]: each request is a JSON object")
            options = item.get("options")
            if isinstance(options, dict) and options.get("cache_dir"):
                raise HttpError(400, f"{'batch[%d].' % i if batch else ''}options.cache_dir: the server keeps its "
                                     f"own cache; leave it out")
            if isinstance(item.get("task"), str):
                item = {**item, "task": to_dict(self.task(item["task"], f"batch[{i}].task" if batch else "task"))}
            try:
                jobs.append(self.server.parse_request(item))
            except Exception as exc:  # noqa: BLE001 - bad input is the client's to fix
                raise HttpError(400, f"{'batch[%d]: ' % i if batch else ''}{type(exc).__name__}: {exc}") from None
        results = [to_dict(r) for r in self.fan_out(jobs, gone)]
        return {"results": results} if isinstance(batch, list) else {"result": results[0]}

    def ping(self) -> dict[str, Any]:
        reply = self.server.handle({"op": "ping"})
        reply.update(http=self.url, queue=self.admission.in_flight, max_queue=self.admission.limit)
        return reply


def unparsed_result(task: Any, options: Any, plugins: Any, reason: str) -> Any:
    """The verdict on an answer that holds no solution: the reward plugin's failure value."""
    from kag.core.agent.episode import failed_result

    result = failed_result(task, options, plugins, f"no solution in the answer: {reason}")
    result.error_kind = PARSE_ERROR
    return result


def reward_reply(results: list[Any]) -> dict[str, Any]:
    """OpenRLHF's reply for EvalResults, one entry per query in order."""
    rewards = [float(r.reward.value) if r.reward else -1.0 for r in results]
    kinds = [None if r.ok else (r.error_kind or "exception") for r in results]
    extra: dict[str, list[float]] = {
        "correct": [1.0 if r.correct else 0.0 for r in results],
        "speedup_vs_eager": [float(r.speedup_vs_eager or 0.0) for r in results],
        "speedup_vs_compile": [float(r.speedup_vs_compile or 0.0) for r in results],
    }
    for kind in REWARD_ERROR_KINDS:
        extra[f"error_{kind}"] = [1.0 if k == kind else 0.0 for k in kinds]
    return {"rewards": rewards, "scores": list(rewards), "extra_logs": extra, "error_kinds": kinds,
            "errors": [None if r.ok else (r.error or "")[:2000] for r in results]}


def request_json(url: str, body: dict[str, Any] | None = None, token: str | None = None,
                 timeout: float = 3600) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Client side: POST ``body`` (GET when None) to ``url``; (status, headers, reply) whatever
    the status, so a caller sees 401, 503 and its Retry-After as values, not exceptions."""
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=timeout) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read() or b"{}")


def _strings(body: dict[str, Any], key: str) -> list[str]:
    if key not in body:
        raise HttpError(400, f"{key!r} is missing: /get_reward takes query, prompts and labels, one per answer "
                             f"(OpenRLHF sends all three)")
    value = body.get(key)
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise HttpError(400, f"{key!r} must be a list of strings (OpenRLHF sends query, prompts and labels)")
    return value


def _client_gone(conn: socket.socket) -> bool:
    """Whether the peer closed the connection (readable with nothing to read)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # a burst of clients (a training step's rollouts) connects at once
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    front: HttpFront
    timeout = 60  # seconds a client may take to send its request (a stalled one frees its thread)
    server_version = "kag-serve"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        routes = {"/health": lambda _body: {"ok": True}, "/ping": lambda _body: self.front.ping()}
        self._answer(routes, body=False)

    def do_POST(self) -> None:  # noqa: N802
        gone = lambda: _client_gone(self.connection)  # noqa: E731
        self._answer({"/get_reward": lambda body: self.front.get_reward(body, gone),
                      "/evaluate": lambda body: self.front.evaluate(body, gone)}, body=True)

    def _answer(self, routes: dict[str, Callable[[Any], dict[str, Any]]], body: bool) -> None:
        url = urlsplit(self.path)
        try:
            if url.path != "/health" and not self.front.authorized(self.headers, parse_qs(url.query)):
                raise HttpError(401, "missing or wrong bearer token (Authorization: Bearer TOKEN, or ?token=TOKEN)",
                                {"WWW-Authenticate": "Bearer"})
            route = routes.get(url.path)
            if route is None:
                raise HttpError(404, f"no {self.command} {url.path}; use POST /get_reward, POST /evaluate, "
                                     f"GET /health or GET /ping")
            self._send(200, route(self._body() if body else None))
        except HttpError as exc:
            self._send(exc.status, {"error": str(exc)}, exc.headers)
        except ClientGone:
            log.info("%s left before its answer; its queued evaluations were dropped", self.client_address)
        except Exception as exc:  # noqa: BLE001 - the server keeps serving whatever a request does
            log.exception("request %s failed", url.path)
            self._send(500, {"error": f"{type(exc).__name__}: {exc}"})

    def _body(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise HttpError(411, "send the JSON body with a Content-Length") from None
        if length > MAX_REQUEST:
            raise HttpError(413, f"a request is at most {MAX_REQUEST} bytes")
        data = self.rfile.read(length)
        if len(data) < length:
            raise ClientGone()
        try:
            body = json.loads(data or b"{}")
        except ValueError as exc:
            raise HttpError(400, f"the body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise HttpError(400, "the body is one JSON object")
        return body

    def _send(self, status: int, reply: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(reply, default=str).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client left: nothing to tell it
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        log.debug("%s " + format, self.client_address[0], *args)
