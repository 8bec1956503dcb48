"""The agent's workspace: make one from a task and the skill template; read a solution back out.

A workspace is the paper's agent workdir (SKILL.md, model.py, model_new.py, kernels/, binding.cpp,
binding_registry.h, utils/). Only ``model_new.py`` and ``kernels/`` are the solution; the fixed
files are written read-only and always come from the package when building, so editing them
changes nothing (they are listed in ``Solution.ignored_files``).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import textwrap
from pathlib import Path
from typing import Any

from kag.core.records import Solution, Task

FIXED_FILES = ("SKILL.md", "binding.cpp", "binding_registry.h")
UTILS = ("compile.sh", "verification.py", "profiling.py", "kag_bridge.py")
META_DIR = ".kag"
META_FILE = "workspace.json"
SKIP_DIRS = {META_DIR, "__pycache__", ".git"}
MAX_FILES = 5000


class WorkspaceError(Exception):
    """A workspace that cannot be made or read; the message names the path and the fix."""


def _skill_dir() -> Path:
    import importlib.resources

    return Path(str(importlib.resources.files("kag.skill")))


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


def starter_model_new(task_code: str) -> str:
    """A ``model_new.py`` to start from: Model's ``__init__`` copied, ``forward`` left to write."""
    init_src = "    def __init__(self, *args, **kwargs):\n        super().__init__()\n"
    forward_args = "self, *inputs"
    returns = ""
    try:
        tree = ast.parse(task_code)
        model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
        methods = _methods(model)
        lines = task_code.splitlines()
        if "__init__" in methods:
            init = methods["__init__"]
            first = min([init.lineno] + [d.lineno for d in init.decorator_list])
            body = "\n".join(lines[first - 1:init.end_lineno])
            body = textwrap.indent(textwrap.dedent(body), "    ")
            init_src = body.replace("super(Model, self)", "super(ModelNew, self)") + "\n"
        if "forward" in methods:
            forward = methods["forward"]
            forward_args = ast.unparse(forward.args)
            if forward.returns is not None:
                returns = f" -> {ast.unparse(forward.returns)}"
    except (SyntaxError, StopIteration, ValueError):
        pass
    return (
        '"""ModelNew: model.py\'s Model, computed by your kernels (see SKILL.md).\n\n'
        "Keep __init__'s signature and the parameter/buffer names of Model (the evaluator loads\n"
        "Model's state dict into ModelNew). No torch compute here: only allocation, views and\n"
        'shape queries; every operation runs in cuda_extension."""\n\n'
        "import torch\nimport torch.nn as nn\n\nimport cuda_extension\n\n\n"
        "class ModelNew(nn.Module):\n"
        f"{init_src}\n"
        f"    def forward({forward_args}){returns}:\n"
        "        # e.g. return cuda_extension.my_op(x), with my_op registered in kernels/*_binding.cpp\n"
        '        raise NotImplementedError("write forward with cuda_extension calls (see SKILL.md)")\n'
    )


def _make_read_only(path: Path, executable: bool = False) -> None:
    mode = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
    if executable:
        mode |= stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
    path.chmod(mode)


def make_workspace(task: Task, dest: Path, backend: str = "cuda") -> Path:
    """Create the workdir for ``task`` at ``dest`` (which must be absent or empty)."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise WorkspaceError(f"{dest} exists and is not an empty folder; choose a new path for the workspace")
    dest.mkdir(parents=True, exist_ok=True)
    skill = _skill_dir()
    for name in FIXED_FILES:
        shutil.copyfile(skill / name, dest / name)
    (dest / "utils").mkdir()
    for name in UTILS:
        shutil.copyfile(skill / "utils" / name, dest / "utils" / name)
    (dest / "model.py").write_text(task.code, encoding="utf-8")
    (dest / "model_new.py").write_text(starter_model_new(task.code), encoding="utf-8")
    (dest / "kernels").mkdir()
    meta = {"task": task.name, "backend": backend, "source": task.source, "level": task.level,
            "problem_id": task.problem_id, "task_path": task.path, "code_hash": task.code_hash}
    (dest / META_DIR).mkdir()
    (dest / META_DIR / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    for name in (*FIXED_FILES, "model.py"):
        _make_read_only(dest / name)
    for name in UTILS:
        _make_read_only(dest / "utils" / name, executable=True)
    return dest


def read_meta(path: Path) -> dict[str, Any]:
    """``.kag/workspace.json`` (task name, backend), or {} for a bare solution folder."""
    meta_path = Path(path) / META_DIR / META_FILE
    if not meta_path.exists():
        return {}
    try:
        data = json.loads(meta_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise WorkspaceError(f"{meta_path}: not valid JSON ({exc}); delete it or recreate the workspace")
    if not isinstance(data, dict):
        raise WorkspaceError(f"{meta_path}: expected a JSON object with task and backend")
    return data


def _walk(root: Path) -> list[Path]:
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            files.append(Path(dirpath) / name)
            if len(files) > MAX_FILES:
                raise WorkspaceError(f"{root} holds more than {MAX_FILES} files; a workspace is "
                                     f"model_new.py plus kernels/, remove the rest")
    return files


def read_solution(path: Path) -> Solution:
    """``model_new.py`` + ``kernels/**`` (keys relative to kernels/); other files are ignored."""
    root = Path(path)
    model_new = root / "model_new.py"
    if not model_new.is_file():
        raise WorkspaceError(f"{model_new} not found; a solution folder holds model_new.py and kernels/")
    kernels: dict[str, str] = {}
    ignored: list[str] = []
    for file in _walk(root):
        rel = file.relative_to(root).as_posix()
        if rel == "model_new.py":
            continue
        if rel.startswith("kernels/") and file.is_file():
            try:
                kernels[rel[len("kernels/"):]] = file.read_text(encoding="utf-8")
                continue
            except UnicodeDecodeError:
                pass  # a binary file under kernels/ is not source: report it as ignored
        ignored.append(rel)
    return Solution(model_new=model_new.read_text(encoding="utf-8"), kernels=kernels, ignored_files=ignored)


def write_solution(solution: Solution, dest: Path) -> None:
    """Write ``model_new.py`` and ``kernels/`` (replacing what was there); nothing else."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    targets: dict[Path, str] = {}
    for name, text in solution.kernels.items():
        rel = Path(name[len("kernels/"):] if name.startswith("kernels/") else name)
        if not rel.parts or rel.is_absolute() or ".." in rel.parts:
            raise WorkspaceError(f"kernels/{name}: a kernel file must be a relative path inside kernels/")
        targets[dest / "kernels" / rel] = text
    if (dest / "kernels").exists():
        shutil.rmtree(dest / "kernels")
    (dest / "kernels").mkdir()
    for target, text in targets.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (dest / "model_new.py").write_text(solution.model_new, encoding="utf-8")
