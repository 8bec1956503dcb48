"""The CUDA backend (the product): nvcc for kernels, the host compiler for torch-facing code.

``kernels/*.cu`` compile with nvcc WITHOUT torch headers (seconds, not tens of seconds), except
``kernels/*_torch.cu``, compiled by nvcc against torch as ``load_inline`` compiles its
``cuda_sources`` (what a KernelBench single-file solution becomes, kag.core.eval.orchestrator.single_file);
``kernels/*_binding.cpp``, other ``kernels/*.cpp`` (cuBLAS/cuDNN host code) and the fixed
``binding.cpp`` compile with the host compiler against torch and the CUDA headers. cuBLAS and
cuDNN are linked only when a source mentions them, from the same place torch loads them.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from kag.plugin import BuildSetupError, cuda_home, gpu_arch, hookimpl, tool_version, torch_info

NVCC_FLAGS = ["-O3", "--use_fast_math", "-std=c++17", "-Xcompiler", "-fPIC"]
# what torch.utils.cpp_extension adds for a .cu that includes torch headers
NVCC_TORCH_FLAGS = ["--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]
TORCH_KERNEL_SUFFIX = "_torch.cu"
TORCH_CUDA_LIBS = ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python", "-lc10_cuda", "-ltorch_cuda"]
_ARCH_RE = re.compile(r"^(\d+)\.(\d+)([af]?)(\+PTX)?$", re.IGNORECASE)


def find_nvcc() -> str | None:
    home = cuda_home()
    if home is not None and (home / "bin" / "nvcc").exists():
        return str(home / "bin" / "nvcc")
    return shutil.which("nvcc")


def gencode_flags(arch_list: str) -> list[str]:
    """``"8.0;9.0a+PTX"`` -> nvcc ``-gencode`` flags (the TORCH_CUDA_ARCH_LIST format)."""
    flags: list[str] = []
    for entry in re.split(r"[;,\s]+", arch_list.strip()):
        if not entry:
            continue
        match = _ARCH_RE.match(entry)
        if match is None:
            raise BuildSetupError(f"TORCH_CUDA_ARCH_LIST entry {entry!r} is not like 9.0, 9.0a or 8.0+PTX")
        num = f"{match.group(1)}{match.group(2)}{match.group(3).lower()}"
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if match.group(4):
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    if not flags:
        raise BuildSetupError("TORCH_CUDA_ARCH_LIST is empty; unset it or give e.g. 9.0")
    return flags


def _arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST, else the GPU's own arch (9.0 -> 9.0a for Hopper's wgmma), else 9.0."""
    env = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if env and env.strip():
        return env
    arch = gpu_arch() or "9.0"
    return "9.0a" if arch == "9.0" else arch


def _nvidia_pip_dirs(sub: str) -> list[Path]:
    """``site-packages/nvidia/*/{sub}`` dirs, where CUDA wheels of torch get cuBLAS/cuDNN."""
    root = Path(torch_info().torch_dir).parent / "nvidia"
    if not root.is_dir():
        return []
    return sorted({p for p in [*root.glob(f"*/{sub}"), *root.glob(f"cu*/{sub}")] if p.is_dir()})


def _find_lib(name: str, prefer_pip: bool) -> list[str]:
    """Link flags for lib<name>: pip nvidia packages (what torch loads) or the toolkit."""
    home = cuda_home()
    toolkit = [home / d for d in ("lib64", "lib", "targets/x86_64-linux/lib")] if home else []
    dirs = (_nvidia_pip_dirs("lib") + toolkit) if prefer_pip else (toolkit + _nvidia_pip_dirs("lib"))
    for d in dirs:
        if (d / f"lib{name}.so").exists():
            return [f"-L{d}", f"-Wl,-rpath,{d}", f"-l{name}"]
        versioned = sorted(d.glob(f"lib{name}.so.*"), key=lambda p: len(p.name))
        if versioned:
            return [f"-L{d}", f"-Wl,-rpath,{d}", f"-l:{versioned[0].name}"]
    raise BuildSetupError(f"lib{name}.so not found in the CUDA toolkit ({home}) or the nvidia pip "
                          f"packages; install it (e.g. pip install nvidia-{name.replace('cudart', 'cuda-runtime')}-cu12)")


class CudaBackend:
    """Compile with nvcc + the host compiler and link against torch's CUDA libraries."""

    name = "cuda"
    device = "cuda"

    def __init__(self, nvcc: str | None = None, cxx: str | None = None, **_: object):
        self.nvcc = nvcc or find_nvcc() or "nvcc"
        self.cxx = cxx or os.environ.get("CXX", "c++")

    @staticmethod
    def check_available() -> str | None:
        if find_nvcc() is None:
            return "nvcc not found; install the CUDA toolkit or set CUDA_HOME"
        try:
            if torch_info().cuda is None:
                return f"torch {torch_info().version} is CPU-only; install a CUDA build of torch"
        except BuildSetupError as exc:
            return str(exc)
        if gpu_arch() is None:
            return "no NVIDIA GPU visible (driver/NVML); use --backend cpu"
        return None

    def toolchain_id(self) -> str:
        info = torch_info()
        return (f"cuda|{tool_version(self.nvcc)}|{tool_version(self.cxx)}|torch {info.version} "
                f"cuda {info.cuda}|abi {info.cxx11_abi}|arch {_arch_list()}")

    def source_kind(self, rel: str) -> str:
        if rel.endswith(TORCH_KERNEL_SUFFIX):
            return "torch_kernel"
        if rel.endswith(".cu"):
            return "kernel"
        return "binding" if rel.endswith("_binding.cpp") else "host"

    def _cuda_includes(self, cudnn_only: bool = False) -> list[str]:
        """Toolkit headers first, then the pip packages' (cudnn.h is rarely in the toolkit)."""
        home = cuda_home()
        dirs = [home / "include"] if home and not cudnn_only else []
        dirs += [d for d in _nvidia_pip_dirs("include") if not cudnn_only or "cudnn" in str(d)]
        return [flag for d in dirs for flag in ("-isystem", str(d))]

    def compile_command(self, kind: str, source: str, obj: str) -> list[str]:
        if kind == "kernel":
            ccbin = ["-ccbin", self.cxx] if os.environ.get("CXX") else []
            return [self.nvcc, *NVCC_FLAGS, *ccbin, *gencode_flags(_arch_list()), "-I.",
                    *self._cuda_includes(cudnn_only=True), "-c", source, "-o", obj]
        if kind == "torch_kernel":
            ccbin = ["-ccbin", self.cxx] if os.environ.get("CXX") else []
            torch_flags = [part for flag in torch_info().compile_flags()  # torch's -std, not NVCC_FLAGS'
                           for part in (["-isystem", flag[len("-isystem"):]] if flag.startswith("-isystem") else [flag])]
            nvcc_flags = [flag for flag in NVCC_FLAGS if not flag.startswith("-std=")]
            return [self.nvcc, *nvcc_flags, *NVCC_TORCH_FLAGS, *ccbin, *gencode_flags(_arch_list()), *torch_flags,
                    *self._cuda_includes(), "-I.", "-c", source, "-o", obj]
        return [self.cxx, "-O3", "-fPIC", *torch_info().compile_flags(), *self._cuda_includes(),
                "-I.", "-c", source, "-o", obj]

    def link_command(self, objects: list[str], out: str, sources_text: str) -> list[str]:
        info = torch_info()
        if info.cuda is None:
            raise BuildSetupError(f"torch {info.version} is CPU-only, so the cuda backend cannot link "
                                  f"cuda_extension; install a CUDA build of torch or use --backend cpu")
        libs = _find_lib("cudart", prefer_pip=False)
        lowered = sources_text.lower()
        if "cublas" in lowered:
            libs += _find_lib("cublas", prefer_pip=True) + _find_lib("cublasLt", prefer_pip=True)
        if "cudnn" in lowered:
            libs += _find_lib("cudnn", prefer_pip=True)
        return [self.cxx, "-shared", *objects, "-o", out, *info.link_flags(), *TORCH_CUDA_LIBS, *libs]


@hookimpl
def kag_register_backends(register) -> None:
    register("cuda", CudaBackend)
