"""The evaluation server (``kag serve``) on the CPU backend: the same verdicts as ``evaluate``,
through a real Unix socket, real warm judges and the real CLI."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kag.core.eval.serve.server import EvalServer, ServerError, evaluate_remote, ping
from kag.core.eval.orchestrator.evaluate import EvalOptions, Timeouts
from kag.core.plugins import Plugins
from tests.conftest import REPO, run_kag
from tests.core.eval.orchestrator.test_evaluate import GOOD, solution, task  # noqa: F401 - task is a fixture

EXAMPLE = REPO / "examples" / "relu" / "cpu"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = EvalServer(tmp_path_factory.mktemp("srv") / "eval.sock", warm=1)
    yield srv
    srv.close()


def options(tmp_path, **kw):
    opts = dict(backend="cpu", num_checks=3, num_timed=5, warmup=1, cache_dir=str(tmp_path),
                timeouts=Timeouts(load_s=60, check_s=10), guards=())
    opts.update(kw)
    return EvalOptions(**opts)


def test_ping_reports_the_server_and_its_warm_judge(server):
    info = ping(server.socket_path)
    assert info["ok"] and info["pid"] == os.getpid() and info["served"] == 0
    deadline = time.monotonic() + 120
    while not info["warm_judges_ready"] and time.monotonic() < deadline:
        time.sleep(0.2)
        info = ping(server.socket_path)
    assert info["warm_judges_started"] == info["warm_judges_ready"] == 1  # its torch is imported: the next evaluation skips that


def test_remote_verdicts_match_the_local_evaluator(server, task, tmp_path):
    plugins = Plugins()
    good = evaluate_remote(server.socket_path, task, GOOD, options(tmp_path), plugins)
    assert good.ok and good.correct and good.reward.value >= 1, good.error
    assert set(good.times_ms) >= {"candidate", "eager", "compile"}
    assert good.metadata["eval_server"]["pid"] == os.getpid()
    wrong = evaluate_remote(server.socket_path, task, solution("return x * self.weight * self.scale"),
                            options(tmp_path, do_timing=False), plugins)
    assert not wrong.ok and wrong.error_kind == "mismatch" and wrong.reward.value == -1
    # the guards run on the server too: plain torch compute in forward is a fallback
    guarded = evaluate_remote(server.socket_path, task, GOOD, options(tmp_path, guards=None, do_timing=False),
                              plugins)
    assert guarded.error_kind == "guard" and any(v.guard == "no-torch-fallback" for v in guarded.violations)
    assert server.served >= 3


def test_an_unknown_plugin_is_refused_with_its_name(server, task, tmp_path):
    plugins = Plugins()
    plugins.selection["reward"] = ("no-such-reward",)
    with pytest.raises(ServerError, match="no-such-reward"):
        evaluate_remote(server.socket_path, task, GOOD, options(tmp_path), plugins)


def test_no_server_is_a_clear_error(tmp_path, task):
    with pytest.raises(ServerError, match="kag serve --socket"):
        evaluate_remote(tmp_path / "none.sock", task, GOOD, options(tmp_path), Plugins())
    proc = run_kag("score", "--task", str(EXAMPLE / "model.py"), "--solution", str(EXAMPLE), "--backend", "cpu",
                   env={"KAG_EVAL_SERVER": str(tmp_path / "none.sock")})
    assert proc.returncode == 2 and "no evaluation server" in proc.stderr and "Traceback" not in proc.stderr


def test_kag_serve_and_kag_score_through_it(tmp_path):
    sock = tmp_path / "s" / "eval.sock"
    env = dict(os.environ, KAG_CACHE_DIR=os.environ.get("KAG_CACHE_DIR") or str(tmp_path / "cache"))  # CI: one cache
    proc = subprocess.Popen([sys.executable, "-m", "kag.cli.main", "serve", "--socket", str(sock)],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sock.exists(), "kag serve did not start"
        second = run_kag("serve", "--socket", str(sock), timeout=60)
        assert second.returncode != 0 and "already listening" in second.stderr
        out = run_kag("score", "--task", str(EXAMPLE / "model.py"), "--solution", str(EXAMPLE), "--backend", "cpu",
                      "--num-timed", "5", "--json", env={"KAG_EVAL_SERVER": str(sock), "KAG_CACHE_DIR": env["KAG_CACHE_DIR"]})
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
        assert result["correct"] and result["reward"]["value"] >= 1 and result["violations"] == []
        assert result["metadata"]["eval_server"]["pid"] == proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "stopped after 1 evaluation" in err
    assert not sock.exists()


def test_a_server_that_dies_mid_request_is_a_clear_error(tmp_path, task):
    """A server killed while evaluating (a fault of the load test): one line, no result, never a verdict."""
    import socket
    import threading

    path = tmp_path / "dying.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def die() -> None:  # reads the request, then goes away without answering
        conn, _ = listener.accept()
        conn.recv(1 << 20)
        conn.close()
        listener.close()

    threading.Thread(target=die, daemon=True).start()
    with pytest.raises(ServerError, match="stopped before answering.*no result was recorded"):
        evaluate_remote(path, task, GOOD, EvalOptions(backend="cpu"), Plugins(), timeout=30)
