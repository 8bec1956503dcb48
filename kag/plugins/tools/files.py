"""``read``, ``write``, ``edit`` and ``multiedit``: file tools confined to the workspace.

``write`` refuses to replace a file the agent has not read in this episode (or that changed since
it read it), so a model cannot clobber code it has not seen. ``edit`` replaces one exact, unique
string; ``multiedit`` applies several edits to one file, all or nothing. Protected files of the
workspace contract (SKILL.md, model.py, the binding and utils/) are never written. Trusted side:
every file is opened through the ToolContext (kag.core.trust.safefs), so a link is refused, never followed.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from kag.plugin import NO_LINKS, Tool, ToolContext, ToolError, ToolOutput, hookimpl

MAX_LINE_CHARS = 2000


def _read_text(ctx: ToolContext, path: Path, shown: str) -> str:
    st = ctx.lstat(path)
    if st is None:
        raise ToolError(f"{shown} does not exist")
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown} is a directory; list it with glob (e.g. pattern '{shown}/*') or bash ls")
    data = ctx.read_bytes(path)  # refuses a link, a FIFO or a device with a reason
    if b"\0" in data[:8192]:
        raise ToolError(f"{shown} is a binary file ({len(data)} bytes); it cannot be shown as text")
    return data.decode("utf-8", errors="replace")


class ReadTool(Tool):
    name = "read"
    description = (
        "Read a text file of the workspace. Lines are numbered from 1 (cat -n style). Use offset (first "
        "line, 1-based) and limit (number of lines) for large files. A file must be read before write can "
        "replace it.")
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace or absolute."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based)."},
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show (default 2000)."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    truncate_keep = "head"
    truncate_hint = "read the rest with offset/limit"

    def __init__(self, max_output_chars: int | None = None, default_limit: int = 2000) -> None:
        super().__init__(max_output_chars)
        self.default_limit = int(default_limit)

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        path = ctx.resolve(args["path"])
        shown = ctx.relative(path)
        text = _read_text(ctx, path, shown)
        ctx.mark_read(path)
        lines = text.splitlines()
        if not lines:
            return ToolOutput(f"({shown} is empty)")
        offset = int(args.get("offset") or 1)
        limit = int(args.get("limit") or self.default_limit)
        if offset > len(lines):
            raise ToolError(f"offset {offset} is past the end of {shown} ({len(lines)} lines)")
        chosen = lines[offset - 1: offset - 1 + limit]
        body = "\n".join(
            f"{n:>6}\t{line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + ' [line truncated]'}"
            for n, line in enumerate(chosen, start=offset))
        last = offset + len(chosen) - 1
        if offset > 1 or last < len(lines):
            body += f"\n[lines {offset}-{last} of {len(lines)}]"
        return ToolOutput(body)


class WriteTool(Tool):
    name = "write"
    description = (
        "Write a file of the workspace (creating parent directories). Replacing an existing file requires "
        "reading it first in this episode. Protected files (SKILL.md, model.py, binding.cpp, "
        "binding_registry.h, utils/) cannot be written.")
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace or absolute."},
            "content": {"type": "string", "description": "The whole new content of the file."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        path = ctx.resolve(args["path"], for_write=True)
        shown = ctx.relative(path)
        st = ctx.lstat(path)
        existed = st is not None
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                raise ToolError(f"{shown} is a directory")
            if stat.S_ISLNK(st.st_mode):
                raise ToolError(f"{shown} is a symbolic link: {NO_LINKS}; remove it first (bash rm {shown})")
            seen = ctx.files_read.get(str(path))
            if seen is None:
                raise ToolError(f"{shown} exists and has not been read in this episode; read it first "
                                f"(or use edit for a targeted change)")
            if st.st_mtime_ns != seen:
                raise ToolError(f"{shown} changed since you last read it; read it again before replacing it")
        content = args["content"]
        ctx.write_text(path, content)  # no link followed, also if one appeared since the checks above
        ctx.mark_read(path)
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return ToolOutput(f"{'replaced' if existed else 'created'} {shown} ({lines} lines, {len(content)} characters)")


def _apply_edit(text: str, old: str, new: str, replace_all: bool, where: str) -> tuple[str, int]:
    if old == "":
        raise ToolError(f"{where}old_string is empty; give the exact text to replace (use write for new files)")
    if old == new:
        raise ToolError(f"{where}old_string and new_string are the same; nothing would change")
    count = text.count(old)
    if count == 0:
        hint = ""
        if old.strip() and old.strip() in text:
            hint = " (it matches when leading/trailing whitespace is ignored: check indentation and newlines)"
        raise ToolError(f"{where}old_string was not found in the file{hint}; read the file and copy the text exactly")
    if count > 1 and not replace_all:
        raise ToolError(f"{where}old_string occurs {count} times; add surrounding lines to make it unique, "
                        f"or set replace_all=true")
    return text.replace(old, new) if replace_all else text.replace(old, new, 1), count if replace_all else 1


_EDIT_FIELDS = {
    "old_string": {"type": "string", "description": "The exact text to replace (must be unique unless replace_all)."},
    "new_string": {"type": "string", "description": "The replacement text."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
}


def _load_for_edit(ctx: ToolContext, raw_path: str) -> tuple[Path, str, str]:
    path = ctx.resolve(raw_path, for_write=True)
    shown = ctx.relative(path)
    return path, shown, _read_text(ctx, path, shown)


class EditTool(Tool):
    name = "edit"
    description = "Replace an exact string in a workspace file. old_string must occur exactly once unless replace_all is true."
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "File path."}, **_EDIT_FIELDS},
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        path, shown, text = _load_for_edit(ctx, args["path"])
        new_text, n = _apply_edit(text, args["old_string"], args["new_string"], bool(args.get("replace_all")), "")
        ctx.write_text(path, new_text, make_parents=False)
        ctx.mark_read(path)
        return ToolOutput(f"edited {shown}: {n} replacement{'s' if n != 1 else ''}")


class MultiEditTool(Tool):
    name = "multiedit"
    description = ("Apply several exact string replacements to one workspace file, in order. Either all edits "
                   "apply or none does (the file is left unchanged on any error).")
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path."},
            "edits": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "object", "properties": _EDIT_FIELDS, "required": ["old_string", "new_string"],
                          "additionalProperties": False},
            },
        },
        "required": ["path", "edits"],
        "additionalProperties": False,
    }

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        path, shown, text = _load_for_edit(ctx, args["path"])
        total = 0
        for i, edit in enumerate(args["edits"], start=1):
            text, n = _apply_edit(text, edit["old_string"], edit["new_string"], bool(edit.get("replace_all")),
                                  f"edit {i} of {len(args['edits'])} failed, no edit was applied: ")
            total += n
        ctx.write_text(path, text, make_parents=False)
        ctx.mark_read(path)
        return ToolOutput(f"edited {shown}: {len(args['edits'])} edits, {total} replacements")


@hookimpl
def kag_register_tools(register) -> None:
    register("read", ReadTool)
    register("write", WriteTool)
    register("edit", EditTool)
    register("multiedit", MultiEditTool)
