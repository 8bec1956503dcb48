"""``kag serve``: the trusted evaluator as a long-lived service with judges kept warm.

``kag score/verify/profile --server SOCKET`` (or ``KAG_EVAL_SERVER=SOCKET``) then skip the seconds a
fresh judge spends importing torch; the verdict is the same (kag.core.eval.serve.server). ``--http
HOST:PORT`` adds an HTTP front on the same judges: OpenRLHF's ``/get_reward`` and kag's ``/evaluate``
(kag.core.eval.serve.http_server).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import click

from kag.cli.common import plugin_options, user_errors


@click.command()
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Unix socket to listen on (default: /tmp/kag-UID/eval.sock).")
@click.option("--warm", type=click.IntRange(0), default=None,
              help="Judges kept started ahead of need (default: one per GPU, at least 1).")
@click.option("--http", "http_bind", metavar="HOST:PORT", default=None,
              help="Also serve HTTP there: POST /get_reward (OpenRLHF) and /evaluate (port 0: any free port).")
@click.option("--token", envvar="KAG_SERVE_TOKEN", show_envvar=True, default=None,
              help="Bearer token HTTP clients must send; required to bind anything but localhost.")
@click.option("--max-queue", type=click.IntRange(1), default=256, show_default=True,
              help="HTTP: evaluations admitted at once; beyond it a request gets 503 with Retry-After.")
@click.option("--workers", type=click.IntRange(1), default=None,
              help="HTTP: evaluations in progress at once (default: 2 per GPU, at least 2).")
@click.option("--task-root", "task_roots", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="HTTP: a folder whose task files clients may name as labels (repeatable); without one, "
                   "labels are dataset ids only, e.g. kernelbench:level1/19.")
@click.option("--backend", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True,
              help="HTTP /get_reward: the backend its completions are judged on.")
@click.option("--num-timed", type=click.IntRange(1), default=None,
              help="HTTP /get_reward: timed calls per evaluation (default: kag score's).")
@plugin_options
@user_errors
def serve(socket_path: Path | None, warm: int | None, http_bind: str | None, token: str | None, max_queue: int,
          workers: int | None, task_roots: tuple[Path, ...], backend: str, num_timed: int | None, plugin_pairs: tuple[str, ...],
          config_path: str | None) -> None:
    """Serve evaluations to `kag score --server` (and over HTTP with --http) until interrupted."""
    from kag.core.eval.serve.server import ENV_VAR, EvalServer
    from kag.core.eval.serve.jsonsocket import SocketInUse

    try:
        server = EvalServer(socket_path, warm=warm)
    except SocketInUse as exc:
        raise click.ClickException(f"{exc}; stop it first or pass another --socket") from None
    front = None
    try:
        if http_bind is not None:
            front = _http_front(server, http_bind, token, max_queue, workers, task_roots, backend, num_timed,
                                plugin_pairs, config_path)
    except BaseException:
        server.close()
        raise
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    click.echo(f"kag serve: listening on {server.socket_path} ({server.warm} judge(s) kept warm, devices "
               f"{server.pool.devices or ['cpu']}); use it with\n  export {ENV_VAR}={server.socket_path}", err=True)
    if front is not None:
        click.echo(f"kag serve: HTTP on {front.url} (POST /get_reward, POST /evaluate; "
                   f"{'bearer token required' if front.token else 'no token'}, {front.admission.workers} "
                   f"worker(s), queue limit {front.admission.limit}; labels: dataset ids"
                   f"{''.join(f', files under {r}' for r in front.resolve_label.roots)})", err=True)
    try:
        from kag.core.eval.orchestrator.judge_process import WARM

        while server.warm and not done.wait(0.2):
            if WARM.count_ready()[1]:
                click.echo(f"kag serve: ready (a judge is warm after {time.time() - server.started:.1f} s)", err=True)
                break
        done.wait()
    finally:
        if front is not None:
            front.close()
        server.close()
        click.echo(f"kag serve: stopped after {server.served} evaluation(s)", err=True)


def _http_front(server: Any, bind: str, token: str | None, max_queue: int, workers: int | None,
                task_roots: tuple[Path, ...], backend: str, num_timed: int | None, plugin_pairs: tuple[str, ...],
                config_path: str | None) -> Any:
    """The HTTP front on ``server``: a label is a dataset id or a task file under ``task_roots``
    (kag.core.eval.serve.task_labels), /get_reward judges with the plugins of --plugin and kag.toml (read
    once, at start)."""
    import functools

    from kag.cli.common import make_plugins
    from kag.cli.score_cmd import resolve_task
    from kag.core.eval.orchestrator.evaluate import EvalOptions
    from kag.core.eval.orchestrator.gpu_pool import pick_backend
    from kag.core.eval.serve.http_server import HttpFront, parse_bind
    from kag.core.eval.serve.task_labels import TaskLabels

    plugins, config = make_plugins(plugin_pairs, config_path)
    options = EvalOptions(backend=pick_backend(backend))
    if num_timed is not None:
        options.num_timed = num_timed
    return HttpFront(server, parse_bind(bind), token or None, max_queue,
                     workers or max(2, 2 * len(server.pool.devices)), options,
                     TaskLabels(task_roots, functools.partial(resolve_task, plugins=plugins, config=config)),
                     completion_solution,
                     plugins.names_selected())


def completion_solution(query: str, prompt: str) -> Any:
    """The solution in an OpenRLHF query (the prompt, then the model's answer): kag's fenced files
    (```python model_new.py ...), else a KernelBench single-file ModelNew, as the reward adapters read
    it (kag.core.solution_text.parse_completion); ValueError when there is neither."""
    from kag.core.solution_text import parse_completion

    at = query.find(prompt) if prompt else -1
    return parse_completion(query[at + len(prompt):] if at >= 0 else query)
