"""The CPU backend: plain C++ kernels (OpenMP allowed) behind the same ``cuda_extension`` module.

It exists so CI runs build -> check -> time -> reward for real without a GPU. ``kernels/foo.cpp``
is compiled without torch headers; ``kernels/foo_binding.cpp`` and the fixed ``binding.cpp`` are
compiled against torch; everything links into one shared library.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil

from kag.plugin import BuildSetupError, hookimpl, tool_version, torch_info

KERNEL_FLAGS = ["-O3", "-march=native", "-fopenmp", "-fPIC", "-std=c++17"]


def _cxx() -> str:
    return os.environ.get("CXX", "c++")


@functools.lru_cache(maxsize=None)
def _cpu_model() -> str:
    """``-march=native`` objects are only valid on the same CPU model."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class CpuBackend:
    """Compile and link a solution for the CPU (host C++ compiler, OpenMP)."""

    name = "cpu"
    device = "cpu"

    def __init__(self, cxx: str | None = None, **_: object):
        self.cxx = cxx or _cxx()

    @staticmethod
    def check_available() -> str | None:
        if shutil.which(_cxx()) is None:
            return f"no C++ compiler ({_cxx()}) on PATH; install g++ or set CXX"
        return None

    def toolchain_id(self) -> str:
        info = torch_info()
        return (f"cpu|{tool_version(self.cxx)}|{_cpu_model()}|torch {info.version}"
                f"|abi {info.cxx11_abi}")

    def source_kind(self, rel: str) -> str:
        if rel.endswith(".cu"):
            raise BuildSetupError(
                f"{rel}: the cpu backend builds C++ kernels (kernels/*.cpp with extern \"C\" "
                f"functions); build this solution with --backend cuda, or port the kernel to C++")
        return "binding" if rel.endswith("_binding.cpp") else "kernel"

    def compile_command(self, kind: str, source: str, obj: str) -> list[str]:
        if kind == "kernel":
            return [self.cxx, *KERNEL_FLAGS, "-I.", "-c", source, "-o", obj]
        # -fopenmp: a KernelBench single-file solution's loops live in its binding (kag.core.eval.orchestrator.single_file)
        return [self.cxx, "-O3", "-fPIC", "-fopenmp", *torch_info().compile_flags(), "-I.", "-c", source, "-o", obj]

    def link_command(self, objects: list[str], out: str, sources_text: str) -> list[str]:
        return [self.cxx, "-shared", "-fopenmp", *objects, "-o", out, *torch_info().link_flags(),
                "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]


@hookimpl
def kag_register_backends(register) -> None:
    register("cpu", CpuBackend)
