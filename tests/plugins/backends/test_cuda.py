"""The cuda backend plugin: arch flags, nvcc compiles without torch, and (on a GPU) a full build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kag.core.eval.orchestrator.build import BuildSetupError, build_solution, torch_info
from kag.core.plugins import Plugins
from kag.core.records import Solution
from kag.plugins.backends import cuda
from kag.plugins.backends.cuda import CudaBackend, gencode_flags

needs_nvcc = pytest.mark.skipif(cuda.find_nvcc() is None, reason="nvcc not installed")


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


ADD_CU = """#include <cuda_runtime.h>
__global__ void add_kernel(const float* a, const float* b, float* c, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void add_launch(const float* a, const float* b, float* c, long n, cudaStream_t stream) {
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(a, b, c, n);
}
"""
ADD_BINDING = """#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "../binding_registry.h"

extern "C" void add_launch(const float*, const float*, float*, long, cudaStream_t);

torch::Tensor add(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.sizes() == b.sizes(), "add: same-shape CUDA tensors");
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && a.scalar_type() == torch::kFloat32, "add: float32");
  auto c = torch::empty_like(a);
  add_launch(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), a.numel(),
             c10::cuda::getCurrentCUDAStream());
  return c;
}
void add_bind(pybind11::module& m) { m.def("add", &add); }
REGISTER_BINDING(add, add_bind);
"""


def test_registered() -> None:
    plugins = Plugins(load_entrypoints=False)
    assert isinstance(plugins.create("backend", "cuda"), CudaBackend)
    # the default is the machine's: cuda where it can run (kag.core.eval.orchestrator.gpu_pool.pick_backend)
    from kag.core.eval.orchestrator.gpu_pool import cuda_usable

    assert plugins.selected("backend") == ("cuda" if cuda_usable() else "cpu")


def test_gencode_flags() -> None:
    assert gencode_flags("9.0") == ["-gencode=arch=compute_90,code=sm_90"]
    assert gencode_flags("8.0;9.0a+PTX") == [
        "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_90a,code=compute_90a"]
    with pytest.raises(BuildSetupError, match="Hopper"):
        gencode_flags("Hopper")


def test_arch_list_env_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    cmd = CudaBackend().compile_command("kernel", "kernels/a.cu", "a.o")
    assert "-gencode=arch=compute_80,code=sm_80" in cmd and "--use_fast_math" in cmd
    assert not any("torch/include" in c for c in cmd), "kernels compile without torch headers"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    host = CudaBackend().compile_command("binding", "kernels/a_binding.cpp", "a.o")
    assert host[0] == CudaBackend().cxx and any(c.endswith("torch/include") for c in host)


def test_check_available_says_why() -> None:
    reason = CudaBackend.check_available()
    if cuda.find_nvcc() is None:
        assert "nvcc" in reason
    elif torch_info().cuda is None:
        assert "CPU-only" in reason
    else:
        assert reason is None or "GPU" in reason


def test_cublas_linked_only_when_used() -> None:
    if torch_info().cuda is None:
        with pytest.raises(BuildSetupError, match="CPU-only"):
            CudaBackend().link_command(["a.o"], "out.so", "")
        return
    plain = CudaBackend().link_command(["a.o"], "out.so", "")
    assert "-lc10_cuda" in plain and not any("cublas" in c for c in plain)
    blas = CudaBackend().link_command(["a.o"], "out.so", "cublasSgemm(handle, ...)")
    assert any("cublas" in c for c in blas)


@needs_nvcc
@pytest.mark.slow
def test_nvcc_compiles_kernels_and_trims_errors(tmp_path: Path) -> None:
    sol = Solution(model_new="", kernels={"add.cu": ADD_CU})
    result = build_solution(sol, CudaBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert "kernels/add.cu" in result.compiled, result.log
    assert len(list((tmp_path / "cache" / "objects").glob("*.o"))) == 2  # add.cu and binding.cpp
    if torch_info().cuda is None:
        assert not result.ok and "CPU-only" in result.log
    bad = Solution(model_new="", kernels={"add.cu": ADD_CU, "bad.cu": "__global__ void k(float* x) {\n"
                                          "  x[0] = undefined_thing;\n}\n"})
    result = build_solution(bad, CudaBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert not result.ok and result.failed == ["kernels/bad.cu"]
    assert sorted(result.cached) == ["binding.cpp", "kernels/add.cu"]
    assert result.log.splitlines()[0] == 'kernels/bad.cu(2): error: identifier "undefined_thing" is undefined'
    assert str(tmp_path) not in result.log


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU")
def test_cuda_build_links_and_runs(tmp_path: Path) -> None:
    sol = Solution(model_new="", kernels={"add.cu": ADD_CU, "add_binding.cpp": ADD_BINDING})
    cold = build_solution(sol, CudaBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert cold.ok, cold.log
    edited = Solution(model_new="", kernels={"add.cu": ADD_CU + "// edited\n", "add_binding.cpp": ADD_BINDING})
    warm = build_solution(edited, CudaBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    print(f"\n[kag build cuda] cold {cold.seconds:.2f} s, after editing add.cu {warm.seconds:.2f} s")
    assert warm.ok and warm.compiled == ["kernels/add.cu"]
    code = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import cuda_extension\n"
            "a, b = torch.randn(3000, device='cuda'), torch.randn(3000, device='cuda')\n"
            "assert torch.equal(cuda_extension.add(a, b), a + b); print('OK')\n")
    proc = subprocess.run([sys.executable, "-c", code, warm.module_dir], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]


GEMM_BINDING = """#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include <cublas_v2.h>
#include "../binding_registry.h"

// C = A @ B for row-major A (m x k) and B (k x n): column-major C^T = B^T A^T.
torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.is_contiguous() && b.is_contiguous(), "gemm: contiguous CUDA");
  const int m = a.size(0), k = a.size(1), n = b.size(1);
  auto c = torch::empty({m, n}, a.options());
  static cublasHandle_t handle = nullptr;
  if (!handle) TORCH_CHECK(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  cublasSetStream(handle, c10::cuda::getCurrentCUDAStream());
  const float one = 1.f, zero = 0.f;
  TORCH_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b.data_ptr<float>(), n,
                          a.data_ptr<float>(), k, &zero, c.data_ptr<float>(), n) == CUBLAS_STATUS_SUCCESS);
  return c;
}
void gemm_bind(pybind11::module& m) { m.def("gemm", &gemm); }
REGISTER_BINDING(gemm, gemm_bind);
"""


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU")
def test_cublas_host_code_links_and_runs(tmp_path: Path) -> None:
    sol = Solution(model_new="", kernels={"gemm_binding.cpp": GEMM_BINDING})
    result = build_solution(sol, CudaBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert result.ok, result.log
    code = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import cuda_extension\n"
            "torch.backends.cuda.matmul.allow_tf32 = False\n"
            "a, b = torch.randn(64, 32, device='cuda'), torch.randn(32, 48, device='cuda')\n"
            "assert torch.allclose(cuda_extension.gemm(a, b), a @ b, atol=1e-4); print('OK')\n")
    proc = subprocess.run([sys.executable, "-c", code, result.module_dir], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]


def test_torch_kernel_files_compile_with_nvcc_against_torch() -> None:
    """kernels/*_torch.cu (a KernelBench single file's cuda_sources) get torch's headers and -std."""
    backend = CudaBackend()
    assert backend.source_kind("kernels/add_torch.cu") == "torch_kernel"
    assert backend.source_kind("kernels/add.cu") == "kernel"
    cmd = backend.compile_command("torch_kernel", "kernels/add_torch.cu", "x.o")
    assert cmd[0] == backend.nvcc and [f for f in cmd if f.startswith("-std=")] == [f"-std={torch_info().cxx_std}"]
    for path in torch_info().include_paths:
        assert cmd[cmd.index(path) - 1] == "-isystem"
    assert "--expt-relaxed-constexpr" in cmd and "-DTORCH_EXTENSION_NAME=cuda_extension" in cmd


@needs_nvcc
@pytest.mark.slow
def test_kernelbench_single_file_sources_compile_with_nvcc(tmp_path: Path) -> None:
    """KernelBench's own prompt example, converted, compiles here (linking needs a CUDA torch)."""
    from kag.core.eval.orchestrator.single_file import convert
    from tests.core.eval.orchestrator.test_single_file import KERNELBENCH_STYLE

    sol = convert(Solution(model_new=KERNELBENCH_STYLE))
    result = build_solution(sol, CudaBackend(), tmp_path / "out", cache_dir=tmp_path / "cache", timeout_s=900)
    assert sorted(result.compiled) == ["binding.cpp", "kernels/elementwise_add_binding.cpp",
                                       "kernels/elementwise_add_torch.cu"], result.log
    assert result.ok or (torch_info().cuda is None and "CPU-only" in result.log), result.log
