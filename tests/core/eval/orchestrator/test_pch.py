"""torch's headers precompiled for the bindings (kag.core.eval.orchestrator.pch): used when the store has them,
refused when tampered with, and never what decides an object."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kag.core.eval.orchestrator import pch
from kag.core.eval.orchestrator.pch import NAME, TorchPch, with_header

CXX = shutil.which("c++") or shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None or not pch.is_gcc(CXX), reason="needs GCC")


def _compile_header(calls: list[list[str]]):
    import subprocess

    class Outcome:
        def __init__(self, ok: bool) -> None:
            self.ok = ok

    def run(cmd: list[str], cwd: Path) -> Outcome:
        calls.append(cmd)
        return Outcome(subprocess.run(cmd, cwd=cwd, capture_output=True).returncode == 0)
    return run


def test_only_gcc_binding_commands_include_the_header():
    command = [CXX, "-O3", "-I.", "-c", "kernels/a_binding.cpp", "-o", "{obj}"]
    assert with_header(command) == [CXX, "-O3", "-I.", "-include", NAME, "-c", "kernels/a_binding.cpp", "-o", "{obj}"]
    assert with_header(["nvcc", "-O3", "-c", "a.cu", "-o", "{obj}"])[:3] == ["nvcc", "-O3", "-c"]
    assert with_header([CXX, "-shared", "a.o"]) == [CXX, "-shared", "a.o"]  # no compile: as it was


def test_the_header_is_compiled_once_then_found_and_a_tampered_one_is_refused(tmp_path, monkeypatch):
    # a header of one small system include stands in for torch's (the same path, seconds not 22)
    monkeypatch.setattr(pch, "HEADER", "#include <vector>\n")
    root = tmp_path / "store"
    command = with_header([CXX, "-O2", "-std=c++17", "-c", "unit.cpp", "-o", "{obj}"])
    calls: list[list[str]] = []
    deadline = time.monotonic() + 600
    first = TorchPch(tmp_path / "b1", _compile_header(calls), root=root)
    tree = tmp_path / "t1"
    tree.mkdir()
    first.place(command, tree, deadline)
    assert len(calls) == 1 and (tree / NAME).read_text() == "#include <vector>\n"
    assert (tree / f"{NAME}.gch").stat().st_size > 1000 and len(list(root.glob("*.gch"))) == 1

    again = TorchPch(tmp_path / "b2", _compile_header(calls), root=root)  # the next build: found, not compiled
    tree2 = tmp_path / "t2"
    tree2.mkdir()
    again.place(command, tree2, deadline)
    assert len(calls) == 1 and (tree2 / f"{NAME}.gch").read_bytes() == (tree / f"{NAME}.gch").read_bytes()

    stored = next(root.glob("*.gch"))
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))  # tampered in the store: refused, compiled again
    third = TorchPch(tmp_path / "b3", _compile_header(calls), root=root)
    tree3 = tmp_path / "t3"
    tree3.mkdir()
    third.place(command, tree3, deadline)
    assert len(calls) == 2 and (tree3 / f"{NAME}.gch").read_bytes() != bytes(data)


def test_without_time_or_a_store_the_bindings_parse_the_header(tmp_path, monkeypatch):
    monkeypatch.setattr(pch, "HEADER", "#include <vector>\n")
    command = with_header([CXX, "-O2", "-c", "unit.cpp", "-o", "{obj}"])
    calls: list[list[str]] = []
    hurried = TorchPch(tmp_path / "b", _compile_header(calls), root=tmp_path / "store")
    tree = tmp_path / "t"
    tree.mkdir()
    hurried.place(command, tree, time.monotonic() + 10)  # under MIN_LEFT_S: not compiled
    assert calls == [] and (tree / NAME).exists() and not (tree / f"{NAME}.gch").exists()
    blocked = tmp_path / "file"
    blocked.write_text("")
    unwritable = TorchPch(tmp_path / "b2", _compile_header(calls), root=blocked / "store")  # not a folder
    tree2 = tmp_path / "t2"
    tree2.mkdir()
    unwritable.place(command, tree2, time.monotonic() + 600)
    assert calls == [] and not (tree2 / f"{NAME}.gch").exists()
    monkeypatch.setenv("KAG_PCH_DIR", "off")  # a docker build container's setting
    off = TorchPch(tmp_path / "b3", _compile_header(calls))
    tree3 = tmp_path / "t3"
    tree3.mkdir()
    off.place(command, tree3, time.monotonic() + 600)
    assert calls == [] and (tree3 / NAME).exists() and not (tree3 / f"{NAME}.gch").exists()


def test_a_binding_builds_with_torchs_precompiled_header(tmp_path):
    """The real header with a real binding, from the user's store (compiled there by the first build
    that needed it, 22 s on the 2-core VM): the module builds."""
    pytest.importorskip("torch")
    from kag.core.eval.orchestrator.build import build_solution
    from kag.core.records import Solution
    from kag.plugins.backends.cpu import CpuBackend

    example = Path(__file__).resolve().parents[4] / "examples" / "relu" / "cpu"
    kernels = {p.name: p.read_text() for p in (example / "kernels").iterdir() if p.is_file()}
    binding = next(n for n in kernels if n.endswith("_binding.cpp"))
    kernels[binding] += f"\n// {tmp_path.name}: a fresh object\n"
    built = build_solution(Solution(model_new=(example / "model_new.py").read_text(), kernels=kernels), CpuBackend(),
                           tmp_path / "a", cache_dir=tmp_path / "cache")
    assert built.ok and f"kernels/{binding}" in built.compiled, built.log
    assert not [p for p in (tmp_path / "a").rglob("*.gch")], "the build's copy of the header was left behind"
    assert list(pch.pch_root().glob("*.gch")), "no header was stored"
