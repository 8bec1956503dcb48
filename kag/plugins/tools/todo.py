"""``todo_write``: the agent's plan, kept in the episode state and echoed back each time."""

from __future__ import annotations

from typing import Any

from kag.plugin import Tool, ToolContext, ToolError, ToolOutput, hookimpl

MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


def render_todos(todos: list[dict[str, Any]]) -> str:
    if not todos:
        return "(the todo list is empty)"
    done = sum(t["status"] == "completed" for t in todos)
    lines = [f"{MARKS[t['status']]} {t.get('id') or i}. {t['content']}" for i, t in enumerate(todos, start=1)]
    return "\n".join(lines + [f"({done}/{len(todos)} completed)"])


class TodoWriteTool(Tool):
    name = "todo_write"
    description = ("Replace your todo list (the whole list each time) to plan and track multi-step work. "
                   "Statuses: pending, in_progress, completed; keep at most one item in_progress.")
    parameters = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "What to do."},
                        "status": {"type": "string", "enum": list(MARKS)},
                        "id": {"type": "string"},
                    },
                    "required": ["content", "status"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["todos"],
        "additionalProperties": False,
    }

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        todos = [dict(t) for t in args["todos"]]
        if any(not t["content"].strip() for t in todos):
            raise ToolError("every todo needs a non-empty content")
        active = sum(t["status"] == "in_progress" for t in todos)
        ctx.state["todos"] = todos
        note = f"\n(note: {active} items are in_progress; keep one at a time)" if active > 1 else ""
        return ToolOutput(render_todos(todos) + note, metadata={"todos": todos})


@hookimpl
def kag_register_tools(register) -> None:
    register("todo_write", TodoWriteTool)
