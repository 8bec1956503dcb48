"""Static guard checks on small sources: what is allowed, what is flagged, and where."""

from __future__ import annotations

import pytest

from kag.core.eval.orchestrator.guarding import GuardOptions, strip_cpp_comments
from kag.core.records import Solution, Task
from kag.plugins.guards.hidden_work import NoHiddenWork
from kag.plugins.guards.output_reuse import NoOutputReuse
from kag.plugins.guards.precision import PrecisionPolicy
from kag.plugins.guards.provenance import classify_kernels, kernel_base_name, source_kernel_names
from kag.plugins.guards.tampering import NoTampering
from kag.plugins.guards.torch_fallback import NoTorchFallback

TASK = Task(name="t", source="test", code="import torch\ndef get_inputs():\n    return [torch.randn(4)]\n")
HONEST_PY = "import torch\nimport torch.nn as nn\nimport cuda_extension\n\n\nclass ModelNew(nn.Module):\n" \
            "    def forward(self, x):\n        return cuda_extension.f(x)\n"


def binding(body: str) -> Solution:
    return Solution(model_new=HONEST_PY, kernels={"f_binding.cpp": body})


def details(guard, solution: Solution, task: Task = TASK) -> list[str]:
    return [v.detail for v in guard.check_solution(solution, task)]


def test_allowed_cpp_calls_and_comments_are_not_flagged() -> None:
    src = """// torch::relu(x) in a comment is fine, as is "at::matmul(" in a string
    /* x.sum() */
    static torch::Tensor f(const torch::Tensor& x) {
      TORCH_CHECK(x.is_contiguous(), "x");
      auto y = torch::empty_like(x); auto z = torch::zeros({4}, x.options()); auto w = at::empty({2}, x.options());
      auto s = at::cuda::getCurrentCUDAStream(); auto h = at::cuda::getCurrentCUDABlasHandle();
      int64_t n = x.numel() + x.size(0) + x.stride(0); float* p = y.data_ptr<float>();
      return y.contiguous();
    }"""
    assert details(NoTorchFallback(), binding(src)) == []


@pytest.mark.parametrize("line,needle", [
    ("return at::matmul(x, x);", "at::matmul"),
    ("return torch::nn::functional::relu(x);", "torch::nn::functional::relu"),
    ("return x.sum(0);", ".sum()"),
    ("return x.to(torch::kHalf);", ".to()"),
    ("auto m = pybind11::module_::import(\"torch\");", "calls back into Python"),
])
def test_cpp_compute_is_flagged_with_file_and_line(line: str, needle: str) -> None:
    found = details(NoTorchFallback(), binding(f"#include <torch/types.h>\n\nstatic torch::Tensor f(torch::Tensor x) {{\n  {line}\n}}\n"))
    assert any(d.startswith("kernels/f_binding.cpp:4") and needle in d for d in found), found


def test_library_policy() -> None:
    src = binding("#include <cublas_v2.h>\n#include <cudnn.h>\nvoid f() { cublasSgemm(0); cudnnCreate(0); }\n")
    assert details(NoTorchFallback(), src) == []
    no_blas = details(NoTorchFallback(allow_cublas=False), src)
    assert no_blas and all("cuBLAS" in d for d in no_blas)
    no_dnn = details(NoTorchFallback(allow_cudnn=False), src)
    assert no_dnn and all("cuDNN" in d for d in no_dnn)


def test_init_may_build_layers_but_forward_may_not_call_them() -> None:
    py = HONEST_PY.replace("    def forward", "    def __init__(self):\n        super().__init__()\n"
                           "        self.conv = nn.Conv2d(3, 3, 3)\n        self.w = nn.Parameter(torch.randn(3))\n\n"
                           "    def forward")
    assert details(NoTorchFallback(), Solution(model_new=py)) == []
    bad = py.replace("return cuda_extension.f(x)", "return self.conv(x)")
    assert any("self.conv" in d and "model_new.py:13" in d for d in details(NoTorchFallback(), Solution(model_new=bad)))


def test_output_reuse_static() -> None:
    assert details(NoOutputReuse(), binding("static torch::Tensor f(const torch::Tensor& x) { return x; }")) == []
    flagged = details(NoOutputReuse(), binding("static int calls = 0;\n__device__ float scratch[1024];\n"))
    assert any("static int calls" in d for d in flagged) and any("__device__" in d for d in flagged)
    py = HONEST_PY.replace("return cuda_extension.f(x)", "global CACHE\n        return CACHE")
    assert any("global CACHE" in d for d in details(NoOutputReuse(), Solution(model_new=py)))


def test_hidden_work_static() -> None:
    assert any("getStreamFromPool" in d for d in details(NoHiddenWork(), binding("auto s = at::cuda::getStreamFromPool();")))
    py = HONEST_PY.replace("return cuda_extension.f(x)", "s = torch.cuda.Stream()\n        return cuda_extension.f(x)")
    assert any("torch.cuda.Stream" in d for d in details(NoHiddenWork(), Solution(model_new=py)))
    py = "import concurrent.futures as cf\n" + HONEST_PY
    assert any("concurrent.futures" in d for d in details(NoHiddenWork(), Solution(model_new=py)))


def test_tampering_static() -> None:
    for stmt, needle in [("torch.Tensor.__eq__ = lambda a, b: True", "torch.Tensor.__eq__"),
                         ("sys.modules['torch'] = None", "sys.modules"),
                         ("setattr(torch.cuda, 'synchronize', print)", "setattr"),
                         ("F.relu = lambda x: x", "torch.nn.functional.relu")]:
        py = "import sys\nimport torch.nn.functional as F\n" + HONEST_PY + stmt + "\n"
        found = details(NoTampering(), Solution(model_new=py))
        assert any(needle in d for d in found), (stmt, found)
    # the TF32 switches belong to the precision policy, not to tampering
    py = HONEST_PY + "torch.backends.cuda.matmul.allow_tf32 = True\n"
    assert details(NoTampering(), Solution(model_new=py)) == []
    assert any("allow_tf32" in d for d in details(PrecisionPolicy(tolerance="strict"), Solution(model_new=py)))


def test_precision_allows_half_when_the_task_is_half() -> None:
    sol = binding("#include <cuda_fp16.h>\n__half h;\n")
    assert details(PrecisionPolicy(tolerance="strict"), sol)
    half_task = Task(name="h", source="test", code="x = torch.randn(4, dtype=torch.float16)")
    assert details(PrecisionPolicy(tolerance="strict"), sol, half_task) == []
    assert GuardOptions().tolerance == "cuda-agent"


def test_kernel_names_and_provenance(tmp_path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text(
        "template <int N> __global__ void __launch_bounds__(256) tiled_kernel(float* x) {}\n"
        "__global__ void plain(float* x) {}\n// __global__ void commented_out(float* x) {}\n")
    own = source_kernel_names(str(tmp_path))
    assert own == {"tiled_kernel", "plain"}
    assert kernel_base_name("void (anonymous namespace)::tiled_kernel<128>(float*)") == "tiled_kernel"
    # symbols of torch's inline templates in a built extension: unbalanced '<' must not loop forever
    # (this hung the CUDA evaluator before: an infinite loop on the extension's symbol table)
    for symbol in ("std::ostream& c10::operator<<(std::ostream&, c10::Half const&)",
                   "bool operator< <float>(float const&, float const&)"):
        assert isinstance(kernel_base_name(symbol), str)
    launched = {"void tiled_kernel<128>(float*)", "plain(float*)", "Memset (Device)", "Memcpy DtoD (Device -> Device)",
                "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::FillFunctor<float>>(int)",
                "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)",
                "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "triton_poi_fused_relu_0",
                "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_nn_align4>(Params)"}
    bad = classify_kernels(launched, own, allow_cublas=True, allow_cudnn=True)
    assert sorted(bad) == sorted(["triton_poi_fused_relu_0",
                                  "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)"])
    strict = classify_kernels(launched, own, allow_cublas=False, allow_cudnn=False)
    assert any("nvjet" in b for b in strict) and any("cutlass" in b for b in strict)


def test_strip_cpp_comments_keeps_lines() -> None:
    text = 'a // x\n/* y\n z */ b "s//t"\n'
    out = strip_cpp_comments(text)
    assert out.count("\n") == text.count("\n") and "x" not in out and "y" not in out and "b" in out
    assert '"s//t"' in strip_cpp_comments(text, keep_strings=True)
