"""The policy protocol: given the conversation and the tools, choose the next assistant message.

A policy plugin (kind ``policy``) returns a ``PolicyStep``: the assistant ``Message`` (its
``tool_calls`` are what the agent runs; none means the model is done), plus token ids and
log-probs when the backend exposes them (RL needs them), token usage and the finish reason.
The ``Policy`` Protocol lives in kag.core.contracts.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import attrs

from kag.core.contracts import Policy  # noqa: F401 - the contract, re-exported
from kag.core.records import Message, ToolCall
from kag.core.agent.toolkit import PARSE_ERROR_KEY, RAW_ARGS_KEY


class PolicyError(Exception):
    """The policy could not produce a step (endpoint down after retries, bad configuration)."""


@attrs.define
class PolicyStep:
    """One model response."""

    message: Message
    finish_reason: str = "stop"
    prompt_token_ids: list[int] = attrs.field(factory=list)
    response_token_ids: list[int] = attrs.field(factory=list)
    response_logprobs: list[float] = attrs.field(factory=list)
    usage: dict[str, int] = attrs.field(factory=dict)

    @property
    def done(self) -> bool:
        """The model asked for no tool: the episode ends."""
        return not self.message.tool_calls


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict; unparseable text is kept under RAW_ARGS_KEY so the
    agent loop can send the model a clear error instead of failing."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            return {RAW_ARGS_KEY: raw, PARSE_ERROR_KEY: str(exc)}
        if isinstance(value, dict):
            return value
        return {RAW_ARGS_KEY: raw, PARSE_ERROR_KEY: f"expected a JSON object, got {type(value).__name__}"}
    return {RAW_ARGS_KEY: repr(raw), PARSE_ERROR_KEY: f"expected a JSON object, got {type(raw).__name__}"}


# Hermes/Qwen-style tool calls written as text: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def parse_tool_call_text(text: str) -> tuple[str, list[ToolCall]]:
    """Split a reply into its prose and its ``<tool_call>`` blocks (an unclosed last block counts).

    A block that does not parse becomes a call whose arguments carry the raw text (RAW_ARGS_KEY)
    and the parser's message, so the caller can answer with an error observation. Shared by the
    ``hf`` policy and the text-only RL environments.
    """
    calls: list[ToolCall] = []
    for match in TOOL_CALL_RE.finditer(text):
        body = match.group(1).strip()
        if not body:
            continue
        try:
            value = json.loads(body)
        except json.JSONDecodeError as exc:
            name = re.search(r'"name"\s*:\s*"([^"]+)"', body)
            calls.append(ToolCall(id=new_call_id(), name=name.group(1) if name else "",
                                  arguments={RAW_ARGS_KEY: body, PARSE_ERROR_KEY: str(exc)}))
            continue
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            calls.append(ToolCall(id=new_call_id(), name="", arguments={
                RAW_ARGS_KEY: body, PARSE_ERROR_KEY: 'a tool call is {"name": ..., "arguments": {...}}'}))
            continue
        calls.append(ToolCall(id=new_call_id(), name=value["name"],
                              arguments=parse_arguments(value.get("arguments", value.get("parameters", {})))))
    content = TOOL_CALL_RE.sub("", text).strip()
    return content, calls


def message_to_openai(message: Message) -> dict[str, Any]:
    """A record ``Message`` as an OpenAI chat message (tool-call arguments as JSON strings)."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments.get(RAW_ARGS_KEY)
                          if RAW_ARGS_KEY in c.arguments else json.dumps(c.arguments)}}
            for c in message.tool_calls
        ]
        if not message.content:
            out["content"] = None
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    return out


def messages_to_openai(messages: list[Message]) -> list[dict[str, Any]]:
    return [message_to_openai(m) for m in messages]


def message_from_openai(data: dict[str, Any]) -> Message:
    """An OpenAI chat message (as an API returns it) as a record ``Message``."""
    calls = []
    for raw in data.get("tool_calls") or []:
        fn = raw.get("function") or {}
        calls.append(ToolCall(id=raw.get("id") or new_call_id(), name=fn.get("name") or "",
                              arguments=parse_arguments(fn.get("arguments"))))
    return Message(role=data.get("role") or "assistant", content=data.get("content") or "", tool_calls=calls,
                   tool_call_id=data.get("tool_call_id"), name=data.get("name"))


def step_from_tokens(tokenizer: Any, stop_ids: Any, prompt: list[int], ids: list[int], logprobs: list[float],
                     finish: str) -> PolicyStep:
    """A policy step from generated token ids (in-process engines: hf, vllm): decode, drop special
    tokens other than the tool-call markers, parse the tool calls, and keep ids and log-probs."""
    text = tokenizer.decode([i for i in ids if i not in stop_ids], skip_special_tokens=False)
    for special in tokenizer.all_special_tokens:  # end-of-turn markers, not prose
        if special not in ("<tool_call>", "</tool_call>"):
            text = text.replace(special, "")
    content, calls = parse_tool_call_text(text)
    usage = {"prompt_tokens": len(prompt), "completion_tokens": len(ids), "total_tokens": len(prompt) + len(ids)}
    return PolicyStep(message=Message(role="assistant", content=content, tool_calls=calls),
                      finish_reason="tool_calls" if calls else finish, prompt_token_ids=prompt,
                      response_token_ids=ids, response_logprobs=logprobs, usage=usage)
