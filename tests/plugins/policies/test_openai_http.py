"""The openai policy against a real HTTP server on 127.0.0.1 (429 first, then a tool call)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from kag.core.plugins import Plugins
from kag.core.agent.policy import PolicyError
from kag.core.records import Message, ToolCall
from kag.plugins.tools.files import ReadTool

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "tiny",
    "choices": [{
        "index": 0,
        "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"model.py\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": "}},
        ]},
        "logprobs": {"content": [{"token": "token_id:11", "logprob": -0.5}, {"token": "token_id:12", "logprob": -0.25}]},
    }],
    "usage": {"prompt_tokens": 42, "completion_tokens": 2, "total_tokens": 44},
}


class Server:
    """Scripted replies: each request pops (status, body) from ``replies``; requests are recorded."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers["Content-Length"])
                outer.requests.append({"path": self.path, "body": json.loads(self.rfile.read(length))})
                outer.headers.append(dict(self.headers))
                status, body = outer.replies.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "0.05")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.httpd.shutdown()


def test_tool_calls_usage_logprobs_and_retry(server: Server):
    server.replies = [(429, {"error": {"message": "slow down"}}), (503, {"error": "busy"}), (200, COMPLETION)]
    policy = Plugins(load_entrypoints=False).create(
        "policy", "openai", base_url=server.url, model="tiny", api_key="sk-test", backoff_s=0.01, logprobs=True,
        temperature=0.5)
    history = [Message(role="system", content="sys"), Message(role="user", content="go"),
               Message(role="assistant", tool_calls=[ToolCall(id="c0", name="read", arguments={"path": "a"})]),
               Message(role="tool", content="file a", tool_call_id="c0", name="read")]
    step = policy.act(history, [ReadTool().schema()])
    assert policy.retries_used == 2 and len(server.requests) == 3
    request = server.requests[-1]
    assert request["path"] == "/v1/chat/completions"
    body = request["body"]
    assert body["model"] == "tiny" and body["temperature"] == 0.5 and body["logprobs"] is True
    assert body["tools"][0]["function"]["name"] == "read" and body["tool_choice"] == "auto"
    assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"path": "a"}'
    assert body["messages"][3] == {"role": "tool", "content": "file a", "tool_call_id": "c0", "name": "read"}
    assert server.headers[-1]["Authorization"] == "Bearer sk-test"

    assert step.finish_reason == "tool_calls" and not step.done
    first, second = step.message.tool_calls
    assert (first.id, first.name, first.arguments) == ("call_a", "read", {"path": "model.py"})
    assert second.name == "bash" and "_raw_arguments" in second.arguments  # malformed: kept for the loop
    assert step.usage == {"prompt_tokens": 42, "completion_tokens": 2, "total_tokens": 44}
    assert step.response_logprobs == [-0.5, -0.25] and step.response_token_ids == [11, 12]


def test_client_errors_are_not_retried(server: Server):
    server.replies = [(400, {"error": {"message": "tools not supported"}})]
    from kag.plugins.policies.openai_http import OpenAIPolicy

    policy = OpenAIPolicy(base_url=server.url, model="tiny", backoff_s=0.01)
    with pytest.raises(PolicyError, match="HTTP 400.*tools not supported"):
        policy.act([Message(role="user", content="hi")], [])
    assert len(server.requests) == 1


def test_gives_up_after_the_retry_budget(server: Server):
    server.replies = [(500, {"error": "down"})] * 3
    from kag.plugins.policies.openai_http import OpenAIPolicy

    policy = OpenAIPolicy(base_url=server.url, model="tiny", backoff_s=0.01, max_retries=2)
    with pytest.raises(PolicyError, match="failed after 3 attempts.*HTTP 500"):
        policy.act([Message(role="user", content="hi")], [])


def test_connection_errors_are_retried_then_reported():
    from kag.plugins.policies.openai_http import OpenAIPolicy

    policy = OpenAIPolicy(base_url="http://127.0.0.1:9/v1", model="m", backoff_s=0.01, max_retries=1, timeout_s=2)
    with pytest.raises(PolicyError, match="failed after 2 attempts"):
        policy.act([Message(role="user", content="hi")], [])
    assert policy.retries_used == 1


def test_configuration_from_environment(monkeypatch: pytest.MonkeyPatch):
    from kag.plugins.policies.openai_http import OpenAIPolicy

    monkeypatch.setenv("OPENAI_BASE_URL", "http://example.invalid/v1/")
    monkeypatch.setenv("KAG_MODEL", "qwen")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    policy = OpenAIPolicy()
    assert (policy.url, policy.model, policy.api_key) == ("http://example.invalid/v1/chat/completions", "qwen", "k")
    monkeypatch.delenv("KAG_MODEL")
    with pytest.raises(PolicyError, match="model name"):
        OpenAIPolicy()
