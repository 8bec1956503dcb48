"""Loading and checking tasks: every task file must define Model, get_inputs, get_init_inputs.

Dataset plugins find files or rows; this module turns each into a checked ``Task`` and collects the
ones that fail (with the file and what is wrong) instead of stopping the whole load.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from kag.core.records import Task

REQUIRED = ("Model", "get_inputs", "get_init_inputs")


class TaskError(Exception):
    """A task that cannot be used; the message names the file and the fix."""


@attrs.define
class SkippedFile:
    path: str
    reason: str


@attrs.define
class LoadedTasks:
    tasks: list[Task] = attrs.field(factory=list)
    skipped: list[SkippedFile] = attrs.field(factory=list)


def check_task_code(code: str, filename: str, execute: bool = True) -> None:
    """Raise TaskError if ``code`` is not a runnable task module.

    The AST check catches syntax errors and missing names without running anything; ``execute``
    then runs the module body (imports, class definitions) to catch import failures.
    """
    try:
        tree = ast.parse(code, filename=filename)
    except SyntaxError as exc:
        raise TaskError(f"{filename}:{exc.lineno}: syntax error: {exc.msg}") from None
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    missing = [name for name in REQUIRED if name not in defined]
    if missing:
        raise TaskError(
            f"{filename}: missing {', '.join(missing)}; a task file must define "
            f"class Model(nn.Module), get_inputs() and get_init_inputs()"
        )
    if not execute:
        return
    namespace: dict[str, Any] = {"__name__": "kag_task", "__file__": filename}
    try:
        exec(compile(tree, filename, "exec"), namespace)
    except BaseException as exc:  # noqa: BLE001 - any failure of a task file is the task's problem
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise TaskError(f"{filename}: fails to import: {type(exc).__name__}: {exc}") from None
    not_callable = [name for name in REQUIRED if not callable(namespace.get(name))]
    if not_callable:
        raise TaskError(f"{filename}: {', '.join(not_callable)} must be callable")


def load_module(code: str, filename: str) -> dict[str, Any]:
    """Execute a task's code and return its namespace (used by the evaluator's workers)."""
    namespace: dict[str, Any] = {"__name__": "kag_task", "__file__": filename}
    exec(compile(code, filename, "exec"), namespace)
    return namespace


def collect(items: Iterable[tuple[str, Callable[[], Task]]], execute: bool = True) -> LoadedTasks:
    """Build and check tasks one by one; a failing item is recorded as skipped, not raised."""
    loaded = LoadedTasks()
    for label, make in items:
        try:
            task = make()
            check_task_code(task.code, task.path or label, execute=execute)
        except (TaskError, OSError, UnicodeDecodeError) as exc:
            loaded.skipped.append(SkippedFile(label, str(exc)))
            continue
        loaded.tasks.append(task)
    return loaded


def parse_ids(spec: str | Iterable[int] | None) -> set[int] | None:
    """``"1-20,23"`` -> {1..20, 23}."""
    if spec is None or spec == "":
        return None
    if not isinstance(spec, str):
        return {int(x) for x in spec}
    out: set[int] = set()
    for part in str(spec).split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                out.update(range(int(lo), int(hi) + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise TaskError(f"bad problem ids {spec!r}: use numbers and ranges, e.g. 1-20,23") from None
    return out


def parse_dataset_spec(spec: str) -> tuple[str, str | None]:
    """``"kernelbench:/path"`` -> ("kernelbench", "/path"); ``"kernelbench"`` -> (.., None)."""
    name, sep, path = spec.partition(":")
    return name.strip(), (os.path.expanduser(path) if sep and path else None)


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")
