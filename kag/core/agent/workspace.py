"""The agent's workspace: make one from a task and the skill template; read a solution back out.

A workspace is the paper's agent workdir (SKILL.md, model.py, model_new.py, kernels/, binding.cpp,
binding_registry.h, utils/). Only ``model_new.py`` and ``kernels/`` are the solution; the fixed
files are written read-only and always come from the package when building, so editing them
changes nothing (they are listed in ``Solution.ignored_files``).

Trusted side: ``make_workspace`` runs before the agent exists; ``read_solution`` and ``read_meta``
read a folder the agent writes, through ``kag.core.trust.safefs`` (no link followed, nothing outside).
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

from kag.core.trust import safefs
from kag.core.records import Solution, Task

# The workspace contract, listed once: the build, the tools' write protection and make_workspace
# all read these, so a file added to the skill is fixed everywhere at once.
BINDING_FILES = ("binding.cpp", "binding_registry.h")  # compiled into every solution, from the package
FIXED_FILES = ("SKILL.md", *BINDING_FILES)
UTILS = ("compile.sh", "verification.py", "profiling.py", "kag_bridge.py")
PROTECTED_PATHS = (*FIXED_FILES, "model.py", "utils/**")  # the agent may read these, never write them
META_DIR = ".kag"
META_FILE = "workspace.json"
BUILD_DIR = f"{META_DIR}/build"
SKIP_DIRS = {META_DIR, "__pycache__", ".git"}
MAX_FILES = 5000


class WorkspaceError(Exception):
    """A workspace that cannot be made or read; the message names the path and the fix."""


def skill_dir() -> Path:
    """The package's ``kag/skill`` folder: the one source of the fixed files (never the workspace's copies)."""
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
    skill = skill_dir()
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
    """``.kag/workspace.json`` (task name, backend), or {} for a bare solution folder; no link followed."""
    rel = f"{META_DIR}/{META_FILE}"
    try:
        data = json.loads(safefs.read_text(path, rel))
    except FileNotFoundError:
        return {}
    except safefs.UnsafePathError as exc:
        raise WorkspaceError(str(exc)) from None
    except ValueError as exc:
        raise WorkspaceError(f"{rel}: not valid JSON ({exc}); delete it or recreate the workspace") from None
    if not isinstance(data, dict):
        raise WorkspaceError(f"{rel}: expected a JSON object with task and backend")
    return data


def skill_text() -> str:
    """SKILL.md from the package: the workspace's copy is the agent's to tamper with."""
    return (skill_dir() / "SKILL.md").read_text(encoding="utf-8")


def read_solution(path: Path) -> Solution:
    """``model_new.py`` + ``kernels/**`` (keys relative to kernels/); other files are ignored.

    Trusted side: nothing is followed out of the folder. A link (or FIFO, device, hard-linked
    file) named model_new.py or under kernels/ is refused with a WorkspaceError saying so; links
    elsewhere are only listed in ``ignored_files``, never opened.
    """
    root = Path(path)
    try:
        model_new = safefs.read_text(root, "model_new.py")
        kernels: dict[str, str] = {}
        ignored: list[str] = []
        for entry in safefs.walk(root, skip=SKIP_DIRS, max_entries=MAX_FILES):
            if entry.kind == "dir" or entry.rel == "model_new.py":
                continue
            if entry.kind == "link" and (entry.rel == "kernels" or entry.rel.startswith("kernels/")):
                raise safefs.link_refusal(entry.rel, "folder" if entry.rel == "kernels" else "file or folder")
            if entry.rel.startswith("kernels/"):
                try:
                    kernels[entry.rel[len("kernels/"):]] = safefs.read_text(root, entry.rel)
                    continue
                except UnicodeDecodeError:
                    pass  # a binary file under kernels/ is not source: report it as ignored
                except FileNotFoundError:
                    continue  # removed since it was listed
            ignored.append(entry.rel)
    except FileNotFoundError:
        raise WorkspaceError(f"{root / 'model_new.py'} not found; a solution folder holds model_new.py "
                             f"and kernels/") from None
    except safefs.UnsafePathError as exc:
        raise WorkspaceError(str(exc)) from None
    except UnicodeDecodeError:
        raise WorkspaceError("model_new.py is not UTF-8 text") from None
    return Solution(model_new=model_new, kernels=kernels, ignored_files=ignored)


def build_in_workspace(solution: Solution, backend: Any, path: Path, **build_options: Any) -> Any:
    """Build ``solution`` into ``path/.kag/build`` (``kag build DIR``); returns the BuildResult.

    The build runs in a private temp folder; only the finished module is written into the
    workspace, through safefs, so a ``.kag`` or ``.kag/build`` that is a link is refused
    (WorkspaceError) and nothing outside the workspace is deleted or written.
    """
    import sysconfig
    import tempfile

    from kag.core.eval.orchestrator.build import MODULE_NAME, build_solution

    root = Path(path)
    try:
        with safefs.open_dir(root, BUILD_DIR, create=True) as build_fd:
            for name in os.listdir(build_fd):  # a failed build must not leave an old module
                if name.startswith(MODULE_NAME):
                    os.unlink(name, dir_fd=build_fd)
        with tempfile.TemporaryDirectory(prefix="kag-build-") as tmp:
            result = build_solution(solution, backend, Path(tmp), **build_options)
            if result.ok:
                name = f"{MODULE_NAME}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
                safefs.write_bytes(root, f"{BUILD_DIR}/{name}", (Path(tmp) / name).read_bytes())
                result.module_dir = str(root / BUILD_DIR)
    except safefs.UnsafePathError as exc:
        raise WorkspaceError(str(exc)) from None
    return result


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
