"""The nvrtc backend: ``kernels/*.cu`` compiled by NVRTC (through cupy), launched from model_new.py.

For the agent's edit-compile-check loop: no host compiler and no nvcc run, so a one-kernel edit
rebuilds in a fraction of a second (``bench/results/2026-11-24-f09f0b3-h100/``). A solution is ``model_new.py`` plus
``kernels/*.cu`` holding ``extern "C" __global__`` kernels only (no launchers, no bindings);
model_new.py launches them through the built module::

    import cuda_extension
    cuda_extension.relu_kernel((blocks,), (256,), x, out, x.numel())

on torch's current stream. The build (trusted side) runs kag.plugins.backends.nvrtc_compile as
its compiler and linker, confined like nvcc; the module it writes is ``cuda_extension.py``.
Everything after the build is the cuda backend's pipeline: the same judge, checks, clock and
guards (the kernels are the solution's own for provenance because they are ``__global__``
functions of its kernels/; cupy's library kernels are not).
"""

from __future__ import annotations

import functools
import importlib.util
import sys

from kag.plugin import BuildSetupError, hookimpl


@functools.lru_cache(maxsize=None)
def nvrtc_version() -> str | None:
    """NVRTC's version as cupy loads it, or None when it cannot be loaded."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        return ".".join(map(str, nvrtc.getVersion()))
    except Exception:  # noqa: BLE001 - no cupy, or no libnvrtc
        return None


def nvrtc_arch() -> str:
    """The GPU's arch in NVRTC's spelling (9.0 -> sm_90a for Hopper's wgmma), else sm_90a."""
    from kag.plugin import gpu_arch

    arch = (gpu_arch() or "9.0").replace(".", "")
    return f"sm_{arch}a" if arch == "90" else f"sm_{arch}"


class NvrtcBackend:
    """Compile kernels/*.cu with NVRTC into CUBINs behind a Python ``cuda_extension`` module."""

    name = "nvrtc"
    build_reads_nvrtc = True  # its compiler is NVRTC (kag.core.eval.orchestrator.build.hidden_from_build)
    device = "cuda"
    module_suffix = ".py"
    fixed_units: tuple[str, ...] = ()  # no binding.cpp: nothing is compiled for the host

    def __init__(self, **_: object):
        pass

    @staticmethod
    def check_available() -> str | None:
        if importlib.util.find_spec("cupy") is None:
            return "cupy is not installed; install kag[cupy] (cupy-cuda13x) or use --backend cuda"
        if nvrtc_version() is None:
            return "cupy cannot load libnvrtc; install the CUDA toolkit or nvidia-cuda-nvrtc"
        from kag.plugin import gpu_arch

        if gpu_arch() is None:
            return "no NVIDIA GPU visible (driver/NVML); use --backend cpu"
        return None

    def toolchain_id(self) -> str:
        return f"nvrtc|{nvrtc_version()}|arch {nvrtc_arch()}|python {sys.version_info[:2]}"

    def _includes(self) -> list[str]:
        from kag.plugin import cuda_home

        home = cuda_home()
        return ["-I", str(home / "include")] if home is not None else []

    def source_kind(self, rel: str) -> str:
        if rel.endswith(".cu"):
            return "kernel"
        raise BuildSetupError(
            f"{rel}: the nvrtc backend compiles kernels/*.cu only (extern \"C\" __global__ kernels, "
            f"launched from model_new.py as cuda_extension.<kernel>(grid, block, *args)); "
            f"build host code and bindings with --backend cuda")

    def compile_command(self, kind: str, source: str, obj: str) -> list[str]:
        return [sys.executable, "-m", "kag.plugins.backends.nvrtc_compile", "compile", "--arch", nvrtc_arch(),
                *self._includes(), source, obj]

    def link_command(self, objects: list[str], out: str, sources_text: str) -> list[str]:
        if not objects:
            raise BuildSetupError("the nvrtc backend found no kernels/*.cu to build")
        return [sys.executable, "-m", "kag.plugins.backends.nvrtc_compile", "link", *objects, "-o", out]


@hookimpl
def kag_register_backends(register) -> None:
    register("nvrtc", NvrtcBackend)
