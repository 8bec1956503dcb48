"""Workspaces: made from real KernelBench tasks, read back as solutions, made by the CLI."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from kag.core.records import Solution, Task
from kag.core.agent.workspace import (WorkspaceError, build_in_workspace, make_workspace, read_meta, read_solution,
                                starter_model_new, write_solution)
from tests.conftest import run_kag


def task_from(path: Path) -> Task:
    return Task(name=path.stem, source="local", code=path.read_text(), path=str(path))


def init_signature(code: str, cls: str) -> str:
    tree = ast.parse(code)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    init = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return ast.unparse(init.args)


def test_make_workspace_layout_and_protection(tmp_path: Path, kernelbench_path: Path) -> None:
    task_file = next((kernelbench_path / "level2").glob("*.py"))
    ws = make_workspace(task_from(task_file), tmp_path / "ws", backend="cpu")
    for name in ("SKILL.md", "model.py", "model_new.py", "binding.cpp", "binding_registry.h",
                 "utils/compile.sh", "utils/verification.py", "utils/profiling.py"):
        assert (ws / name).is_file(), name
    assert (ws / "kernels").is_dir() and not any((ws / "kernels").iterdir())
    assert (ws / "model.py").read_text() == task_file.read_text()
    for name in ("SKILL.md", "model.py", "binding.cpp", "binding_registry.h", "utils/compile.sh"):
        assert not (ws / name).stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), name
    assert (ws / "utils" / "compile.sh").stat().st_mode & stat.S_IXUSR
    assert (ws / "model_new.py").stat().st_mode & stat.S_IWUSR
    meta = read_meta(ws)
    assert meta["task"] == task_file.stem and meta["backend"] == "cpu"
    assert json.loads((ws / ".kag" / "workspace.json").read_text()) == meta


def test_starter_keeps_init_signature(kernelbench_path: Path) -> None:
    for task_file in sorted((kernelbench_path / "level2").glob("*.py"))[:10]:
        code = task_file.read_text()
        starter = starter_model_new(code)
        compile(starter, "model_new.py", "exec")
        assert init_signature(starter, "ModelNew") == init_signature(code, "Model"), task_file.name
        assert "import cuda_extension" in starter and "super(Model," not in starter


def test_make_workspace_refuses_non_empty_dir(tmp_path: Path) -> None:
    (tmp_path / "something").write_text("x")
    task = Task(name="t", source="local", code="class Model: pass\n")
    with pytest.raises(WorkspaceError, match="not an empty folder"):
        make_workspace(task, tmp_path)


def test_read_solution_keeps_only_model_new_and_kernels(tmp_path: Path, kernelbench_path: Path) -> None:
    ws = make_workspace(task_from(kernelbench_path / "level1" / "19_ReLU.py"), tmp_path / "ws")
    (ws / "kernels" / "relu.cu").write_text("// kernel\n")
    (ws / "kernels" / "sub").mkdir()
    (ws / "kernels" / "sub" / "util.cuh").write_text("// header\n")
    (ws / "kernels" / "blob.bin").write_bytes(b"\xff\xfe\x00\x81")
    (ws / "notes.txt").write_text("scratch")
    (ws / "kernels" / "__pycache__").mkdir()
    (ws / "kernels" / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    sol = read_solution(ws)
    assert sol.kernels == {"relu.cu": "// kernel\n", "sub/util.cuh": "// header\n"}
    assert sol.model_new == (ws / "model_new.py").read_text()
    assert "notes.txt" in sol.ignored_files and "kernels/blob.bin" in sol.ignored_files
    assert "SKILL.md" in sol.ignored_files and "utils/compile.sh" in sol.ignored_files
    assert not any(f.startswith(".kag") or "__pycache__" in f for f in sol.ignored_files)


def test_read_solution_without_model_new(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="model_new.py not found"):
        read_solution(tmp_path)


def _solution_folder(root: Path) -> Path:
    (root / "kernels").mkdir(parents=True)
    (root / "model_new.py").write_text("import cuda_extension\n")
    (root / "kernels" / "a.cu").write_text("// a\n")
    return root


def test_read_solution_refuses_a_kernel_linked_to_a_host_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret 77")
    ws = _solution_folder(tmp_path / "ws")
    (ws / "kernels" / "x.cu").symlink_to(secret)
    with pytest.raises(WorkspaceError, match="^kernels/x.cu is a symbolic link: links are not allowed") as err:
        read_solution(ws)
    assert "host secret" not in str(err.value)


def test_read_solution_refuses_a_linked_kernels_folder_or_model_new(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "x.cu").write_text("host secret 77")
    ws = _solution_folder(tmp_path / "ws")
    (ws / "kernels").rename(tmp_path / "old-kernels")
    (ws / "kernels").symlink_to(host)
    with pytest.raises(WorkspaceError, match="^kernels is a symbolic link"):
        read_solution(ws)
    (ws / "kernels").unlink()
    (ws / "model_new.py").unlink()
    (ws / "model_new.py").symlink_to(host / "x.cu")
    with pytest.raises(WorkspaceError, match="^model_new.py is a symbolic link"):
        read_solution(ws)


def test_links_outside_kernels_are_listed_as_ignored_never_read(tmp_path: Path) -> None:
    ws = _solution_folder(tmp_path / "ws")
    (ws / "notes").symlink_to("/etc")
    sol = read_solution(ws)
    assert sol.kernels == {"a.cu": "// a\n"} and sol.ignored_files == ["notes"]


def test_read_meta_refuses_a_linked_meta_file_or_folder(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "workspace.json").write_text('{"backend": "host"}')
    ws = _solution_folder(tmp_path / "ws")
    assert read_meta(ws) == {}
    (ws / ".kag").symlink_to(host)
    with pytest.raises(WorkspaceError, match="^.kag is a symbolic link"):
        read_meta(ws)
    (ws / ".kag").unlink()
    (ws / ".kag").mkdir()
    (ws / ".kag" / "workspace.json").symlink_to(host / "workspace.json")
    with pytest.raises(WorkspaceError, match="^.kag/workspace.json is a symbolic link"):
        read_meta(ws)


def test_build_in_workspace_writes_only_the_module_and_refuses_a_linked_build_folder(tmp_path: Path) -> None:
    from tests.core.fakes import CopyBackend

    host = tmp_path / "host"
    (host / "src").mkdir(parents=True)
    (host / "src" / "keep.txt").write_text("keep")
    (host / "cuda_extension.so").write_text("host module")
    ws = _solution_folder(tmp_path / "ws")
    built = build_in_workspace(read_solution(ws), CopyBackend(), ws, cache_dir=tmp_path / "cache")
    assert built.ok and built.module_dir == str(ws / ".kag" / "build"), built.log
    assert [p.name for p in (ws / ".kag" / "build").iterdir()][0].startswith("cuda_extension")
    assert len(list((ws / ".kag" / "build").iterdir())) == 1  # the build tree stayed in a temp folder
    shutil.rmtree(ws / ".kag" / "build")
    (ws / ".kag" / "build").symlink_to(host)
    with pytest.raises(WorkspaceError, match="^.kag/build is a symbolic link"):
        build_in_workspace(read_solution(ws), CopyBackend(), ws, cache_dir=tmp_path / "cache")
    assert (host / "src" / "keep.txt").read_text() == "keep"
    assert sorted(p.name for p in host.iterdir()) == ["cuda_extension.so", "src"]


def test_write_solution_round_trip_replaces_kernels(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "old.cu").write_text("stale")
    sol = Solution(model_new="import cuda_extension\n", kernels={"a.cu": "A", "kernels/b_binding.cpp": "B",
                                                                 "d/c.cuh": "C"})
    write_solution(sol, tmp_path)
    back = read_solution(tmp_path)
    assert back.kernels == {"a.cu": "A", "b_binding.cpp": "B", "d/c.cuh": "C"}
    assert back.model_new == sol.model_new
    with pytest.raises(WorkspaceError, match="inside kernels/"):
        write_solution(Solution(model_new="", kernels={"../../etc/x": "no"}), tmp_path)
    assert (tmp_path / "kernels" / "a.cu").exists()  # a rejected solution leaves the old one intact


def test_cli_workspace(tmp_path: Path, kernelbench_path: Path) -> None:
    task_file = kernelbench_path / "level1" / "19_ReLU.py"
    proc = run_kag("workspace", str(task_file), str(tmp_path / "ws"), "--backend", "cpu")
    assert proc.returncode == 0, proc.stderr
    assert read_meta(tmp_path / "ws")["backend"] == "cpu"
    assert "utils/compile.sh" in proc.stdout
    again = run_kag("workspace", str(task_file), str(tmp_path / "ws"))
    assert again.returncode == 2 and "not an empty folder" in again.stderr


def test_cli_workspace_bad_inputs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass NotModel: pass\n")
    proc = run_kag("workspace", str(bad), str(tmp_path / "ws"))
    assert proc.returncode == 2 and "bad.py" in proc.stderr and "missing Model" in proc.stderr
    proc = run_kag("workspace", str(tmp_path / "nope.py"), str(tmp_path / "ws"))
    assert proc.returncode == 2 and "not found" in proc.stderr
    good = tmp_path / "good.py"
    good.write_text("class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n")
    proc = run_kag("workspace", str(good), str(tmp_path / "ws"), "--backend", "tpu")
    assert proc.returncode == 2 and "unknown backend 'tpu'" in proc.stderr
    assert not (tmp_path / "ws").exists()


def test_scripts_reach_the_evaluator_through_the_bridge(tmp_path: Path) -> None:
    """In a sandbox ($KAG_BRIDGE set) the protected scripts send their request over the socket."""
    import subprocess
    import sys

    from kag.core.agent.bridge import BridgeReply, EvalBridge

    task = Task(name="t", source="local", code="class Model: pass\n")
    ws = make_workspace(task, tmp_path / "ws", backend="cpu")
    seen: list[tuple[str, list[str]]] = []

    def handler(action: str, args: list[str]) -> BridgeReply:
        seen.append((action, args))
        return BridgeReply(f"{action} report", 1 if action == "compile" else 0)

    with EvalBridge(handler, tmp_path / "bridge") as bridge:
        env = dict(os.environ, KAG_BRIDGE=str(bridge.socket_path), KAG_PYTHON=sys.executable)
        runs = [["bash", "utils/compile.sh"], [sys.executable, "utils/verification.py", "--json"],
                [sys.executable, "utils/profiling.py"]]
        procs = [subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=60) for cmd in runs]
    assert seen == [("compile", []), ("verify", ["--json"]), ("profile", [])]
    assert [p.returncode for p in procs] == [1, 0, 0]
    assert [p.stdout for p in procs] == ["compile report\n", "verify report\n", "profile report\n"]


def test_fixed_files_are_listed_once_and_shipped():
    """The build, the tools' write protection and make_workspace read one list of fixed files."""
    from kag.core.agent import toolkit, workspace

    assert toolkit.PROTECTED_PATHS is workspace.PROTECTED_PATHS
    assert set(workspace.BINDING_FILES) <= set(workspace.FIXED_FILES) <= set(workspace.PROTECTED_PATHS)
    for name in workspace.FIXED_FILES + tuple(f"utils/{u}" for u in workspace.UTILS):
        assert (workspace.skill_dir() / name).is_file(), name
