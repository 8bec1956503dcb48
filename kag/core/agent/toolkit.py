"""Shared pieces of the agent's tools: outputs, the per-episode context, validation, truncation.

Tools (plugins of kind ``tool``) and the agent loop both use these. A tool never lets an exception
escape: every failure becomes a ``ToolOutput`` with ``is_error=True`` that the model can act on.
Trusted side: tools run outside the sandbox on the agent-writable workspace, so their file access
goes through ``ToolContext`` (kag.core.trust.safefs: no link followed, nothing outside the workspace).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

import attrs

from kag.core.trust import safefs
from kag.core.records import Message, ToolCall
from kag.core.agent.workspace import PROTECTED_PATHS

if TYPE_CHECKING:
    from kag.core.plugins import Plugins
    from kag.core.agent.sandbox import SandboxHandle

# A policy that cannot parse a tool call's JSON arguments stores the raw text under this key
# (and the parser's message under PARSE_ERROR_KEY); validation turns it into an error observation.
RAW_ARGS_KEY = "_raw_arguments"
PARSE_ERROR_KEY = "_parse_error"

DEFAULT_OUTPUT_CHARS = 30_000


class ToolError(Exception):
    """Raised inside a tool for a failure the model should see as an observation."""


@attrs.define
class ToolOutput:
    """What a tool returns: the observation text and whether it reports a failure."""

    text: str
    is_error: bool = False
    metadata: dict[str, Any] = attrs.field(factory=dict)


def truncate(text: str, budget: int, *, tool: str = "", hint: str = "", keep: str = "middle") -> str:
    """Cut ``text`` to ``budget`` characters with a note saying so.

    ``keep="middle"`` keeps the head and the tail (a compiler's first error and a script's last
    lines both matter); ``keep="head"`` keeps only the beginning (file listings, reads).
    """
    if budget <= 0 or len(text) <= budget:
        return text
    omitted = len(text) - budget
    who = f" of {tool}" if tool else ""
    note = f"[... {omitted} characters omitted: the output exceeded the {budget}-character budget{who}"
    note += f"; {hint}]" if hint else "]"
    if keep == "head":
        return f"{text[:budget]}\n{note}"
    head = budget // 2
    tail = budget - head
    return f"{text[:head]}\n{note}\n{text[len(text) - tail:]}"


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """safefs refusals (a link, a FIFO, a missing file) as observations the model can act on."""
    try:
        yield
    except (safefs.UnsafePathError, FileNotFoundError) as exc:
        raise ToolError(str(exc)) from None


# ---------------------------------------------------------------------------------------------
# the per-episode context
@attrs.define(eq=False)
class ToolContext:
    """Everything a tool may touch in one episode: the sandbox, protected paths and episode state.

    ``files_read`` maps resolved paths to the mtime seen when the agent read them, so ``write``
    can refuse to clobber a file the agent has not seen (or that changed since). ``state`` holds
    tool-owned episode state (todo list, the bash session, background jobs); ``close()`` ends it.
    """

    sandbox: "SandboxHandle"
    protected: tuple[str, ...] = PROTECTED_PATHS
    files_read: dict[str, int] = attrs.field(factory=dict)
    state: dict[str, Any] = attrs.field(factory=dict)
    _closers: list[Callable[[], None]] = attrs.field(factory=list)

    @classmethod
    def from_sandbox(cls, sandbox: "SandboxHandle", protected: Iterable[str] = PROTECTED_PATHS) -> "ToolContext":
        return cls(sandbox=sandbox, protected=tuple(protected))

    @property
    def root(self) -> Path:
        """The workspace directory on this machine (file tools work on it directly)."""
        return Path(self.sandbox.path()).resolve()

    @property
    def workdir(self) -> str:
        """The workspace as commands inside the sandbox see it (may differ from ``root``)."""
        return str(getattr(self.sandbox, "workdir", self.root))

    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        """The host path for a path the model gave, refusing anything outside the workspace.

        Relative paths are relative to the workspace root; absolute paths may use either the
        host root or the sandbox's view of it. The path is normalised as text, never through
        the file system: links are refused when the file is opened (``read_bytes``,
        ``write_text``, ``lstat``), so checking here and opening later cannot be raced.
        """
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty string")
        raw = path.strip()
        workdir = self.workdir.rstrip("/")
        if workdir and (raw == workdir or raw.startswith(workdir + "/")) and workdir != str(self.root):
            raw = raw[len(workdir):].lstrip("/") or "."
        resolved = Path(os.path.normpath(raw if os.path.isabs(raw) else self.root / raw))
        if resolved != self.root and self.root not in resolved.parents:
            raise ToolError(f"{path}: outside the workspace {self.workdir}; only files in the workspace can be used")
        if for_write:
            rel = self.relative(resolved)
            pattern = self.protected_match(rel)
            if pattern is not None:
                raise ToolError(f"{rel} is protected (matches {pattern!r}) and cannot be written; "
                                f"put your code in model_new.py and kernels/")
        return resolved

    def relative(self, resolved: Path) -> str:
        rel = resolved.relative_to(self.root).as_posix()
        return rel or "."

    # File access for tools: through kag.core.trust.safefs, no link followed (a refusal is a ToolError).
    def lstat(self, resolved: Path) -> os.stat_result | None:
        """The status of the name itself (None if absent); a link among its folders is refused."""
        with _tool_errors():
            return safefs.lstat(self.root, self.relative(resolved))

    def read_bytes(self, resolved: Path, max_bytes: int | None = safefs.MAX_FILE_BYTES) -> bytes:
        with _tool_errors():
            return safefs.read_bytes(self.root, self.relative(resolved), max_bytes)

    def write_text(self, resolved: Path, text: str, make_parents: bool = True) -> None:
        """Replace or create the file (and, with ``make_parents``, its folders) in place."""
        with _tool_errors():
            safefs.write_bytes(self.root, self.relative(resolved), text.encode("utf-8"), make_parents=make_parents)

    def protected_match(self, rel: str) -> str | None:
        """The protected pattern that ``rel`` (workspace-relative, posix) matches, if any."""
        rel = PurePosixPath(rel).as_posix()
        for pattern in self.protected:
            if pattern.endswith("/**"):
                base = pattern[:-3]
                if rel == base or rel.startswith(base + "/"):
                    return pattern
            elif fnmatch.fnmatchcase(rel, pattern):
                return pattern
        return None

    def mark_read(self, resolved: Path) -> None:
        try:
            st = self.lstat(resolved)
        except ToolError:
            return
        if st is not None:
            self.files_read[str(resolved)] = st.st_mtime_ns

    def on_close(self, closer: Callable[[], None]) -> None:
        self._closers.append(closer)

    def close(self) -> None:
        """End tool state (kill the shell and background jobs); safe to call twice."""
        closers, self._closers = self._closers, []
        for closer in reversed(closers):
            try:
                closer()
            except Exception:
                pass


# ---------------------------------------------------------------------------------------------
# argument validation (the subset of JSON Schema the tools use)
_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def schema_errors(value: Any, schema: Mapping[str, Any], where: str = "arguments") -> list[str]:
    """Problems of ``value`` against ``schema`` (type, required, enum, minimum, items, extra keys)."""
    errors: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if not any(_TYPES[k](value) for k in kinds):
            return [f"{where} must be of type {' or '.join(kinds)}, got {type(value).__name__} {json.dumps(value)[:80]}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where} must be one of {schema['enum']}, got {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where} must be >= {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where} must be <= {schema['maximum']}, got {value}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{where} needs at least {schema['minItems']} item(s)")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += schema_errors(item, schema["items"], f"{where}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{where} is missing the required field {name!r}")
        for name, item in value.items():
            if name in props:
                errors += schema_errors(item, props[name], f"{where}.{name}" if where != "arguments" else name)
            elif schema.get("additionalProperties", True) is False:
                errors.append(f"{where} has an unknown field {name!r} (known: {', '.join(props) or 'none'})")
    return errors


# ---------------------------------------------------------------------------------------------
# the tool base class
class Tool:
    """Base of the built-in tools: schema, validation, error capture and output budget.

    Subclasses set ``name``, ``description``, ``parameters`` and implement ``run(ctx, args)``,
    raising ``ToolError`` for failures the model should read.
    """

    name: str = ""
    description: str = ""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    max_output_chars: int = DEFAULT_OUTPUT_CHARS
    truncate_keep: str = "middle"
    truncate_hint: str = ""

    def __init__(self, max_output_chars: int | None = None) -> None:
        if max_output_chars is not None:
            self.max_output_chars = int(max_output_chars)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling description of this tool."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def validate(self, args: Any) -> list[str]:
        if isinstance(args, dict) and RAW_ARGS_KEY in args:
            why = args.get(PARSE_ERROR_KEY) or "not a JSON object"
            return [f"the arguments are not valid JSON ({why}): {str(args[RAW_ARGS_KEY])[:200]!r}"]
        return schema_errors(args, self.parameters)

    def __call__(self, ctx: ToolContext, /, **args: Any) -> ToolOutput:
        errors = self.validate(args)
        if errors:
            return ToolOutput(f"{self.name}: invalid arguments: " + "; ".join(errors)
                              + f". Expected parameters: {json.dumps(self.parameters)}", is_error=True)
        try:
            out = self.run(ctx, args)
        except ToolError as exc:
            out = ToolOutput(f"{self.name}: {exc}", is_error=True)
        except Exception as exc:  # a tool bug is still an observation, never the end of the episode
            out = ToolOutput(f"{self.name}: internal error {type(exc).__name__}: {exc}", is_error=True)
        out.text = truncate(out.text, self.max_output_chars, tool=self.name, hint=self.truncate_hint,
                            keep=self.truncate_keep)
        return out

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        raise NotImplementedError


def tools_by_name(tools: Iterable[Any]) -> dict[str, Any]:
    """Index tool objects by their ``name`` (duplicate names are an error)."""
    out: dict[str, Any] = {}
    for tool in tools:
        if tool.name in out:
            raise ValueError(f"two tools are named {tool.name!r}")
        out[tool.name] = tool
    return out


def build_tools(plugins: "Plugins", names: Iterable[str] | None = None,
                options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Create the selected tools (or ``names``) from the plugin registry, with per-tool options."""
    options = options or {}
    chosen = list(names) if names is not None else list(plugins.selected_all("tool"))
    return tools_by_name(plugins.create("tool", n, **dict(options.get(n, {}))) for n in chosen)


def tool_schemas(tools: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [tool.schema() for tool in tools.values()]


def call_tool(tools: Mapping[str, Any], ctx: ToolContext, call: ToolCall) -> ToolOutput:
    """Run one tool call from the model; unknown tools and bad arguments become error observations."""
    tool = tools.get(call.name)
    if tool is None:
        return ToolOutput(f"unknown tool {call.name!r}; the tools are: {', '.join(sorted(tools))}", is_error=True)
    if not isinstance(call.arguments, dict):
        return ToolOutput(f"{call.name}: the arguments must be a JSON object, got {type(call.arguments).__name__}",
                          is_error=True)
    try:
        return tool(ctx, **call.arguments)
    except Exception as exc:  # third-party tools may not follow the never-raise rule
        return ToolOutput(f"{call.name}: internal error {type(exc).__name__}: {exc}", is_error=True)


def observation_message(call: ToolCall, output: ToolOutput) -> Message:
    """The ``tool`` message that answers ``call`` in the conversation."""
    return Message(role="tool", content=output.text, tool_call_id=call.id, name=call.name)
