"""KernelBench single-file solutions (load_inline) read statically into kag solutions."""

from __future__ import annotations

from pathlib import Path

import pytest

from kag.core.eval.orchestrator.single_file import SingleFileError, convert, is_single_file
from kag.core.records import Solution

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "examples" / "relu" / "kernelbench"

KERNELBENCH_STYLE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

elementwise_add_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void elementwise_add_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) out[idx] = a[idx] + b[idx];
}

torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b) {
    auto size = a.numel();
    auto out = torch::zeros_like(a);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    elementwise_add_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    return out;
}
"""

elementwise_add_cpp_source = (
    "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);"
)

elementwise_add = load_inline(
    name="elementwise_add",
    cpp_sources=elementwise_add_cpp_source,
    cuda_sources=elementwise_add_source,
    functions=["elementwise_add_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.elementwise_add = elementwise_add

    def forward(self, a, b):
        return self.elementwise_add.elementwise_add_cuda(a, b)
'''


def test_kernelbench_prompt_example_becomes_a_kag_solution():
    """The example of KernelBench's own prompt: kernels/, a registered binding, and model_new.py
    calling the built module; nothing else of the file changes."""
    solution = Solution(model_new=KERNELBENCH_STYLE)
    assert is_single_file(solution)
    out = convert(solution)
    assert sorted(out.kernels) == ["elementwise_add_binding.cpp", "elementwise_add_torch.cu"]
    cu = out.kernels["elementwise_add_torch.cu"]
    assert cu.startswith("#include <torch/types.h>") and "__global__ void elementwise_add_kernel" in cu
    binding = out.kernels["elementwise_add_binding.cpp"]
    assert "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);" in binding
    assert 'm.def("elementwise_add_cuda", &elementwise_add_cuda, "elementwise_add_cuda");' in binding
    assert "REGISTER_BINDING(elementwise_add, elementwise_add_kag_bind);" in binding
    assert out.model_new.startswith("import cuda_extension")
    assert "elementwise_add = cuda_extension\n" in out.model_new and "load_inline(" not in out.model_new
    assert out.model_new.splitlines()[1:] == KERNELBENCH_STYLE.replace(
        KERNELBENCH_STYLE[KERNELBENCH_STYLE.index("load_inline(\n"):KERNELBENCH_STYLE.index(")\n\n\nclass") + 1],
        "cuda_extension").splitlines()


def test_a_workspace_solution_is_not_single_file():
    assert not is_single_file(Solution(model_new="import cuda_extension\n", kernels={"a.cu": "x"}))
    assert not is_single_file(Solution(model_new="x = 'load_inline'\n"))


@pytest.mark.parametrize("source, why", [
    ("m = load_inline(name='m', cpp_sources=open('a.cpp').read(), functions=['f'])\n", "not a string kag can read"),
    ("s = 'int f();'\nm = load_inline('m', s)\n", "without functions"),
    ("m = load_inline(name='m', cpp_sources='', functions=['f(x)'])\n", "not a C\\+\\+ function name"),
    ("a = load_inline(name='a', cpp_sources='', functions=['f'])\nb = load_inline(name='b', cpp_sources='', "
     "functions=['f'])\n", "bound by two load_inline calls"),
    ("kw = {}\nm = load_inline(**kw)\n", "name its arguments"),
])
def test_what_cannot_be_read_statically_is_refused_with_the_reason(source, why):
    with pytest.raises(SingleFileError, match=why):
        convert(Solution(model_new=source))


def test_constants_concatenations_positional_arguments_and_future_imports():
    source = ('"""doc"""\nfrom __future__ import annotations\nimport torch.utils.cpp_extension as ext\n'
              'HEAD = "int "\nSRC = HEAD + "twice(int x) { return 2 * x; }"\n'
              'mod = ext.load_inline("my-mod", [SRC], None, None, {"twice": "doubles"})\n')
    out = convert(Solution(model_new=source))
    assert out.model_new.splitlines()[:3] == ['"""doc"""', "from __future__ import annotations", "import cuda_extension"
                                              "  # kag: the load_inline sources below are built into this module"]
    assert "mod = cuda_extension" in out.model_new
    binding = out.kernels["my_mod_binding.cpp"]
    assert "int twice(int x) { return 2 * x; }" in binding and '"doubles"' in binding


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_the_shipped_examples_convert(backend):
    out = convert(Solution(model_new=(EXAMPLE / backend / "model_new.py").read_text()))
    assert any(name.endswith("_binding.cpp") for name in out.kernels)
    assert (backend == "cuda") == any(name.endswith("_torch.cu") for name in out.kernels)
