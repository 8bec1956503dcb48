"""The ``openai`` policy: any OpenAI-compatible ``/v1/chat/completions`` endpoint with tool calls.

vLLM's and SGLang's servers, hosted APIs. Plain ``urllib`` (no SDK). 429, 5xx and connection
errors are retried with exponential backoff (honouring ``Retry-After``); other HTTP errors are
raised at once with the server's message. Usage is recorded; with ``logprobs=true`` the sampled
tokens' log-probs are recorded too (and token ids when the server returns them, as vLLM does
with ``return_tokens_as_token_ids``).
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from typing import Any

from kag.plugin import Message, PolicyError, PolicyStep, hookimpl, message_from_openai, messages_to_openai

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


def _token_id(token: str) -> int | None:
    """vLLM's ``return_tokens_as_token_ids`` spells tokens as ``token_id:123``."""
    if token.startswith("token_id:"):
        try:
            return int(token.split(":", 1)[1])
        except ValueError:
            return None
    return None


class OpenAIPolicy:
    """Options: base_url (…/v1), model, api_key, temperature, top_p, max_tokens, timeout_s,
    max_retries, backoff_s, max_backoff_s, logprobs, extra_body (merged into each request)."""

    name = "openai"

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 temperature: float | None = None, top_p: float | None = None, max_tokens: int | None = None,
                 timeout_s: float = 600.0, max_retries: int = 6, backoff_s: float = 1.0,
                 max_backoff_s: float = 60.0, logprobs: bool = False,
                 extra_body: dict[str, Any] | None = None) -> None:
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/")
        self.model = model or os.environ.get("KAG_MODEL") or ""
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        if not self.base_url:
            raise PolicyError("the openai policy needs a base URL: --policy-option base_url=http://HOST:PORT/v1 (or [policies.openai] base_url in kag.toml, or OPENAI_BASE_URL)")
        if not self.model:
            raise PolicyError("the openai policy needs a model name: --policy-option model=NAME (or KAG_MODEL)")
        self.temperature = None if temperature is None else float(temperature)
        self.top_p = None if top_p is None else float(top_p)
        self.max_tokens = None if max_tokens is None else int(max_tokens)
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.logprobs = bool(logprobs) if not isinstance(logprobs, str) else logprobs.lower() in ("1", "true", "yes")
        self.extra_body = dict(extra_body or {})
        self.retries_used = 0  # over the policy's life, for reports and tests

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def request_body(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages_to_openai(messages)}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        for key in ("temperature", "top_p", "max_tokens"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        if self.logprobs:
            body["logprobs"] = True
        body.update(self.extra_body)
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt) * (0.75 + 0.5 * random.random())
            try:
                req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace")[:2000]
                if exc.code not in RETRY_STATUS:
                    raise PolicyError(f"{self.url} answered HTTP {exc.code}: {detail}") from None
                last = f"HTTP {exc.code}: {detail}"
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                if retry_after:
                    try:
                        delay = min(self.max_backoff_s, float(retry_after))
                    except ValueError:
                        pass
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            except json.JSONDecodeError as exc:
                raise PolicyError(f"{self.url} returned a body that is not JSON: {exc}") from None
            if attempt < self.max_retries:
                self.retries_used += 1
                time.sleep(delay)
        raise PolicyError(f"{self.url} failed after {self.max_retries + 1} attempts; last error: {last}")

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyStep:
        reply = self._post(self.request_body(messages, tools))
        choices = reply.get("choices") or []
        if not choices:
            raise PolicyError(f"{self.url} returned no choices: {json.dumps(reply)[:500]}")
        choice = choices[0]
        message = message_from_openai({**(choice.get("message") or {}), "role": "assistant"})
        logprobs: list[float] = []
        token_ids: list[int] = []
        content = (choice.get("logprobs") or {}).get("content") or []
        for entry in content:
            logprobs.append(float(entry.get("logprob", 0.0)))
            tid = _token_id(str(entry.get("token", "")))
            if tid is not None:
                token_ids.append(tid)
        if len(token_ids) != len(logprobs):
            token_ids = []
        # vLLM can also return the ids directly (return_token_ids / prompt_token_ids extensions)
        token_ids = list(choice.get("token_ids") or token_ids)
        usage = {k: int(v) for k, v in (reply.get("usage") or {}).items() if isinstance(v, (int, float))}
        return PolicyStep(message=message, finish_reason=choice.get("finish_reason") or "stop",
                          prompt_token_ids=list(reply.get("prompt_token_ids") or choice.get("prompt_token_ids") or []),
                          response_token_ids=token_ids, response_logprobs=logprobs, usage=usage)


@hookimpl
def kag_register_policies(register) -> None:
    register("openai", OpenAIPolicy)
