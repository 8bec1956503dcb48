"""``kag serve --http``: a real server process on a free port, real CPU tasks from examples/*/cpu,
real judges; requests as OpenRLHF sends them (and through OpenRLHF's own client when installed)."""

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kag.core.eval.serve.http_server import request_json
from tests.conftest import KERNELBENCH, REPO, run_kag

RELU = REPO / "examples" / "relu" / "cpu"
SIGMOID = REPO / "examples" / "sigmoid" / "cpu"
PROMPT = "<|im_start|>user\nWrite a faster ReLU (model.py below).<|im_end|>\n<|im_start|>assistant\n"


def answer(solution: Path) -> str:
    """A model's answer holding ``solution`` as fenced files (the single-turn answer format)."""
    blocks = [f"```python model_new.py\n{(solution / 'model_new.py').read_text()}```"]
    blocks += [f"```cpp kernels/{k.name}\n{k.read_text()}```" for k in sorted((solution / "kernels").iterdir())]
    return "Here is my solution.\n\n" + "\n".join(blocks) + "\n"


def solution_json(solution: Path) -> dict:
    return {"model_new": (solution / "model_new.py").read_text(),
            "kernels": {k.name: k.read_text() for k in (solution / "kernels").iterdir()}}


class Served:
    """A ``kag serve --http`` process; ``url`` is where it answers."""

    def __init__(self, tmp: Path, *args: str, token: str = "", env: dict[str, str] | None = None):
        self.tmp, self.log = tmp, tmp / "serve.log"
        # the run's cache where it has one (CI: builds and baselines made once), else the test's own
        env = dict(os.environ, KAG_CACHE_DIR=os.environ.get("KAG_CACHE_DIR") or str(tmp / "cache"), KAG_SERVE_TOKEN=token,
                   **(env or {}))
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "kag.cli.main", "serve", "--socket",
                                          str(tmp / "s" / "eval.sock"), *args], stderr=log, env=env)
        deadline = time.monotonic() + 120
        while not (found := re.search(r"HTTP on http://[^:]+:(\d+)", self.log.read_text())):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{found[1]}"

    def ping(self, token: str | None = None) -> dict:
        status, _, reply = request_json(self.url + "/ping", token=token, timeout=30)
        assert status == 200, reply
        return reply

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)
        return self.log.read_text()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("http")
    shutil.copytree(RELU, tmp / "outside")  # a real task outside every root, and a root with a link to it
    (tmp / "root").mkdir()
    (tmp / "root" / "link.py").symlink_to(tmp / "outside" / "model.py")
    srv = Served(tmp, "--http", "127.0.0.1:0", "--task-root", str(REPO / "examples"), "--task-root",
                 str(tmp / "root"), "--backend", "cpu",
                 "--num-timed", "5", "--max-queue", "2", "--workers", "2",
                 env={"KAG_KERNELBENCH": str(KERNELBENCH)})
    yield srv
    log = srv.stop()
    assert srv.proc.returncode == 0 and "stopped after" in log, log


def test_get_reward_scores_an_openrlhf_request(served, tmp_path):
    """The exact request OpenRLHF's remote reward client sends ({query, prompts, labels}, the
    query being the prompt followed by the answer): a correct answer, one without code and one
    whose kernel does not compile, judged at once; rewards, scores and numeric extra_logs back."""
    broken = tmp_path / "broken"
    shutil.copytree(RELU, broken)
    kernel = next((broken / "kernels").glob("*.cpp"))
    kernel.write_text(kernel.read_text() + "\nthis is not C++;\n")
    relu = str(RELU / "model.py")
    status, _, out = request_json(served.url + "/get_reward", {
        "query": [PROMPT + answer(RELU), PROMPT + "I cannot do this.", PROMPT + answer(broken)],
        "prompts": [PROMPT] * 3, "labels": [relu] * 3}, timeout=600)
    assert status == 200, out
    assert out["rewards"][0] >= 1 and out["rewards"][1:] == [-1.0, -1.0], out
    assert out["scores"] == out["rewards"]
    assert out["error_kinds"] == [None, "parse", "build"], out["errors"]
    logs = out["extra_logs"]
    assert logs["correct"] == [1.0, 0.0, 0.0] and logs["speedup_vs_eager"][0] > 0
    assert logs["error_parse"] == [0.0, 1.0, 0.0] and logs["error_build"] == [0.0, 0.0, 1.0]
    assert all(len(v) == 3 and all(isinstance(x, float) for x in v) for v in logs.values())
    assert "no fenced files" in out["errors"][1] and out["errors"][2].startswith("build failed")


def test_get_reward_refuses_an_unknown_label_by_name(served):
    status, _, reply = request_json(served.url + "/get_reward", {
        "query": [PROMPT + answer(RELU)], "prompts": [PROMPT], "labels": ["no/such/task.py"]}, timeout=60)
    assert status == 400 and "labels[0] 'no/such/task.py'" in reply["error"], reply
    assert "no such file under the task roots" in reply["error"], reply


def test_labels_resolve_only_inside_the_task_roots_and_datasets(served):
    """A client names a file the server may not read by every route: an absolute path, a relative
    one climbing out of a root, a link inside a root pointing out, a dataset id carrying a path.
    Each is refused unread (a readable task outside the roots is refused as /etc/passwd is: no
    oracle); a task under a root, by either name, and a dataset id are served."""
    outside = served.tmp / "outside" / "model.py"
    refused = {"/etc/passwd": "nor a task file", str(outside): "nor a task file",
               "../../../../../../../../etc/passwd": "nor a task file", "relu/../../kag/api.py": "nor a task file",
               "link.py": "nor a task file", f"kernelbench:{outside}:level1/19": "no such file under the task roots",
               "file:/etc/passwd": "no such file under the task roots", "": "a label is"}
    for label, expected in refused.items():
        status, _, reply = request_json(served.url + "/get_reward", {
            "query": ["x"], "prompts": [""], "labels": [label]}, timeout=60)
        assert status == 400 and "labels[0]" in reply["error"] and expected in reply["error"], (label, reply)
        assert "root:" not in reply["error"] and "Model" not in reply["error"], (label, reply)
    for label in ("relu/cpu/model.py", str(RELU / "model.py"), "kernelbench:level1/19"):
        status, _, reply = request_json(served.url + "/get_reward", {
            "query": ["no code"], "prompts": [""], "labels": [label]}, timeout=120)
        assert status == 200 and reply["error_kinds"] == ["parse"], (label, reply)


def test_errors_name_the_field_that_is_wrong(served):
    cases = [({"query": "x"}, "'labels' is missing"), ({"labels": ["a"]}, "'query' is missing"),
             ({"query": ["x"], "labels": "kernelbench:level1/19", "prompts": 3}, "'prompts' must be a list"),
             ({"query": ["x", "y"], "labels": ["kernelbench:level1/19"]}, "differ in length")]
    for body, expected in cases:
        status, _, reply = request_json(served.url + "/get_reward", body, timeout=60)
        assert status == 400 and expected in reply["error"], (body, reply)
    status, _, reply = request_json(served.url + "/evaluate", {
        "task": "relu/cpu/model.py", "solution": solution_json(RELU), "options": {"cache_dir": "/tmp/elsewhere"}},
        timeout=60)
    assert status == 400 and reply["error"].startswith("options.cache_dir"), reply


def test_evaluate_takes_kags_json_and_a_label(served):
    status, _, reply = request_json(served.url + "/evaluate", {
        "task": str(RELU / "model.py"), "solution": solution_json(RELU),
        "options": {"backend": "cpu", "num_checks": 2, "do_timing": False}}, timeout=600)
    assert status == 200, reply
    result = reply["result"]
    assert result["correct"] and result["reward"]["value"] == 1 and result["violations"] == [], result["error"]
    assert result["metadata"]["eval_server"]["http"] == served.url
    assert result["metadata"]["eval_server"]["pid"] == served.proc.pid


def test_openrlhfs_own_client_gets_kag_rewards(served):
    """OpenRLHF's remote reward model client (SingleTurnAgentExecutor, what --remote_rm_url uses),
    and what its sample generator does with the reply (tensors of rewards and extra_logs)."""
    agent = pytest.importorskip("openrlhf.utils.agent", reason="OpenRLHF is not installed (pip install --no-deps "
                                                                "openrlhf aiohttp pylatexenc)")
    import torch

    executor = agent.SingleTurnAgentExecutor(served.url + "/get_reward")
    infos = asyncio.run(executor._fetch_rewards_via_http([PROMPT + answer(RELU)], [PROMPT], [str(RELU / "model.py")]))
    info = infos[0]
    assert info["rewards"][0] >= 1 and info["extra_logs"]["correct"] == [1.0], info
    assert torch.tensor([info["rewards"]]).item() >= 1
    for value in info["extra_logs"].values():
        torch.tensor([value])


def test_a_full_queue_gets_503_with_retry_after_and_leavers_do_not_hang_it(served):
    """Two evaluations fill the queue (--max-queue 2): the next request gets 503 + Retry-After, a
    larger batch 413. The client that filled it leaves mid-request, another sends half a body and
    leaves: the queue drains and the server answers again."""
    wrong = {"task": str(SIGMOID / "model.py"), "solution": solution_json(RELU),
             "options": {"backend": "cpu", "num_checks": 1, "do_timing": False}}
    body = json.dumps({"batch": [wrong, wrong]}).encode()
    port = int(served.url.rsplit(":", 1)[1])
    leaver = socket.create_connection(("127.0.0.1", port))
    leaver.sendall(b"POST /evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    deadline = time.monotonic() + 60
    while served.ping()["queue"] < 2:
        assert time.monotonic() < deadline, "the batch was never admitted"
        time.sleep(0.05)
    status, headers, reply = request_json(served.url + "/evaluate", wrong, timeout=60)
    assert status == 503 and int(headers["Retry-After"]) >= 1 and "queue is full" in reply["error"], reply
    status, _, _ = request_json(served.url + "/get_reward", {
        "query": [answer(RELU)], "prompts": [""], "labels": [str(RELU / "model.py")]}, timeout=60)
    assert status == 503
    status, _, reply = request_json(served.url + "/evaluate", {"batch": [wrong] * 3}, timeout=60)
    assert status == 413 and "--max-queue" in reply["error"]
    leaver.close()
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"query\": [")
    half.close()
    deadline = time.monotonic() + 900  # seconds on an idle machine; minutes on a loaded 2-core one
    while served.ping()["queue"]:
        assert time.monotonic() < deadline, "the leaver's evaluations never left the queue"
        time.sleep(0.2)
    status, _, reply = request_json(served.url + "/get_reward", {
        "query": ["no code"], "prompts": [""], "labels": [str(RELU / "model.py")]}, timeout=60)
    assert status == 200 and reply["error_kinds"] == ["parse"] and reply["rewards"] == [-1.0]


def test_a_public_bind_needs_a_token_and_checks_it(tmp_path):
    refused = run_kag("serve", "--socket", str(tmp_path / "r" / "eval.sock"), "--warm", "0", "--http", "0.0.0.0:0",
                      env={"KAG_SERVE_TOKEN": ""}, timeout=120)
    assert refused.returncode == 2 and "--token" in refused.stderr and "Traceback" not in refused.stderr
    srv = Served(tmp_path, "--warm", "0", "--http", "0.0.0.0:0", token="s3cret")
    try:
        assert request_json(srv.url + "/health", timeout=30)[2] == {"ok": True}
        for token in (None, "wrong"):
            status, headers, _ = request_json(srv.url + "/get_reward", {"query": [], "labels": []}, token=token,
                                              timeout=30)
            assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
        assert request_json(srv.url + "/ping", timeout=30)[0] == 401
        assert srv.ping(token="s3cret")["ok"]
        status, _, reply = request_json(srv.url + "/get_reward?token=s3cret", {"query": [], "labels": []}, timeout=30)
        assert status == 200 and reply["rewards"] == []
    finally:
        srv.stop()
