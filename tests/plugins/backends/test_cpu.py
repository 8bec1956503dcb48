"""The cpu backend plugin: registration, file kinds and the commands it gives build.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kag.core.eval.orchestrator.build import BuildSetupError
from kag.core.plugins import Plugins
from kag.plugins.backends.cpu import CpuBackend


def test_registered_and_available() -> None:
    plugins = Plugins(load_entrypoints=False)
    backend = plugins.create("backend", "cpu")
    assert isinstance(backend, CpuBackend) and backend.device == "cpu"
    assert plugins.entry("backend", "cpu").availability() is None


def test_unavailable_without_a_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    assert "no-such-compiler-xyz" in CpuBackend.check_available()


def test_source_kinds() -> None:
    backend = CpuBackend()
    assert backend.source_kind("kernels/relu.cpp") == "kernel"
    assert backend.source_kind("kernels/relu_binding.cpp") == "binding"
    with pytest.raises(BuildSetupError, match="--backend cuda"):
        backend.source_kind("kernels/relu.cu")


def test_kernel_compiles_without_torch_headers(tmp_path: Path) -> None:
    """A kernel command has no torch include path, so a kernel that includes torch fails."""
    backend = CpuBackend()
    cmd = backend.compile_command("kernel", "k.cpp", "k.o")
    assert "-fopenmp" in cmd and "-march=native" in cmd and not any("torch" in c for c in cmd)
    binding = backend.compile_command("binding", "b.cpp", "b.o")
    assert any(c.endswith("torch/include") for c in binding)
    assert any(c.startswith("-D_GLIBCXX_USE_CXX11_ABI=") for c in binding)
    assert "-DTORCH_EXTENSION_NAME=cuda_extension" in binding
    (tmp_path / "k.cpp").write_text('extern "C" int twice(int x) { return 2 * x; }\n')
    assert subprocess.run(cmd, cwd=tmp_path, capture_output=True).returncode == 0
    (tmp_path / "k.cpp").write_text("#include <torch/types.h>\n")
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode != 0 and "torch/types.h" in proc.stderr


def test_link_command_links_torch_and_openmp() -> None:
    cmd = CpuBackend().link_command(["a.o", "b.o"], "out.so", "")
    assert cmd[:3] == [CpuBackend().cxx, "-shared", "-fopenmp"]
    for lib in ("-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"):
        assert lib in cmd
    assert any(c.startswith("-Wl,-rpath,") for c in cmd)


def test_toolchain_id_names_compiler_and_torch() -> None:
    tid = CpuBackend().toolchain_id()
    assert tid.startswith("cpu|") and "torch " in tid and shutil.which(CpuBackend().cxx) in tid
