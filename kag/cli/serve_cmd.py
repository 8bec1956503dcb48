"""``kag serve``: the trusted evaluator as a long-lived service with judges kept warm.

``kag score/verify/profile --server SOCKET`` (or ``KAG_EVAL_SERVER=SOCKET``) then skip the seconds a
fresh judge spends importing torch; the verdict is the same (kag.core.eval.server).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import click

from kag.cli.common import user_errors


@click.command()
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Unix socket to listen on (default: /tmp/kag-UID/eval.sock).")
@click.option("--warm", type=click.IntRange(0), default=None,
              help="Judges kept started ahead of need (default: one per GPU, at least 1).")
@user_errors
def serve(socket_path: Path | None, warm: int | None) -> None:
    """Serve evaluations to `kag score --server` until interrupted."""
    from kag.core.eval.server import ENV_VAR, EvalServer
    from kag.core.eval.jsonsocket import SocketInUse

    try:
        server = EvalServer(socket_path, warm=warm)
    except SocketInUse as exc:
        raise click.ClickException(f"{exc}; stop it first or pass another --socket") from None
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    click.echo(f"kag serve: listening on {server.socket_path} ({server.warm} judge(s) kept warm, devices "
               f"{server.pool.devices or ['cpu']}); use it with\n  export {ENV_VAR}={server.socket_path}", err=True)
    try:
        from kag.core.eval.judge_process import WARM

        while server.warm and not done.wait(0.2):
            if WARM.count_ready()[1]:
                click.echo(f"kag serve: ready (a judge is warm after {time.time() - server.started:.1f} s)", err=True)
                break
        done.wait()
    finally:
        server.close()
        click.echo(f"kag serve: stopped after {server.served} evaluation(s)", err=True)
