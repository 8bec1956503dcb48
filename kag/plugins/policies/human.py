"""The ``human`` policy: a person plays the model in a terminal.

Each turn prints the messages the person has not seen yet (task, tool results), then reads one
action: ``TOOL {json args}``, or ``done`` (or end of input) to finish. The JSON may continue over
several lines until it parses, and strings may hold literal newlines, so a file can be pasted into
``write {"path": "model_new.py", "content": "...`` as is. ``tools`` lists the tools and their
parameters; ``help`` the syntax.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from kag.plugin import Message, PolicyStep, ToolCall, hookimpl, new_call_id

HELP = ("Type TOOL {json arguments} (e.g. read {\"path\": \"model.py\"}), 'tools' to list the tools, "
        "or 'done' to finish.")


class HumanPolicy:
    name = "human"

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None, prompt: str = "> ") -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.prompt = prompt
        self.shown = 0

    def reset(self, **_: Any) -> None:
        self.shown = 0

    def _print(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def _show(self, messages: list[Message]) -> None:
        if len(messages) < self.shown:  # a new episode started without reset
            self.shown = 0
        for message in messages[self.shown:]:
            if message.role == "assistant":
                continue  # the person's own actions
            label = f"tool result ({message.name or message.tool_call_id})" if message.role == "tool" else message.role
            self._print(f"--- {label} ---\n{message.content}")
        self.shown = len(messages)

    def _tools(self, tools: list[dict[str, Any]]) -> str:
        lines = []
        for tool in tools:
            fn = tool.get("function", tool)
            params = fn.get("parameters", {}).get("properties", {})
            required = set(fn.get("parameters", {}).get("required", []))
            args = ", ".join(f"{k}{'' if k in required else '?'}: {v.get('type', '?')}" for k, v in params.items())
            lines.append(f"  {fn.get('name')}({args})")
        return "tools:\n" + "\n".join(lines)

    def _readline(self) -> str | None:
        self.stdout.write(self.prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        return None if line == "" else line

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyStep:
        self._show(messages)
        names = {t.get("function", t).get("name") for t in tools}
        while True:
            line = self._readline()
            if line is None:
                return self._done("end of input")
            line = line.strip()
            if not line:
                continue
            if line in ("done", "exit", "quit"):
                return self._done("done")
            if line in ("help", "?"):
                self._print(HELP)
                continue
            if line == "tools":
                self._print(self._tools(tools))
                continue
            name, _, raw = line.partition(" ")
            if name not in names:
                self._print(f"unknown tool {name!r}; the tools are: {', '.join(sorted(n for n in names if n))}. {HELP}")
                continue
            args = self._parse(raw)
            if args is None:
                continue
            call = ToolCall(id=new_call_id(), name=name, arguments=args)
            return PolicyStep(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls")

    def _parse(self, raw: str) -> dict[str, Any] | None:
        """JSON arguments, reading more lines while the object is incomplete; None after an error."""
        text = raw.strip() or "{}"
        while True:
            try:
                value = json.loads(text, strict=False)
            except json.JSONDecodeError as exc:
                if exc.pos >= len(text.rstrip()) - 1 or "Unterminated" in exc.msg:
                    more = self.stdin.readline()  # the object continues on the next line
                    if more == "":
                        self._print(f"incomplete JSON arguments: {exc}")
                        return None
                    text += "\n" + more.rstrip("\n")
                    continue
                self._print(f"invalid JSON arguments ({exc}); {HELP}")
                return None
            if not isinstance(value, dict):
                self._print(f"the arguments must be a JSON object, got {type(value).__name__}; {HELP}")
                return None
            return value

    def _done(self, why: str) -> PolicyStep:
        return PolicyStep(message=Message(role="assistant", content=f"(human: {why})"), finish_reason="stop")


@hookimpl
def kag_register_policies(register) -> None:
    register("human", HumanPolicy)
