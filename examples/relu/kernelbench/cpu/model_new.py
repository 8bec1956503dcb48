"""ReLU as a KernelBench single-file solution for the CPU: the kernel of ../../cpu in a load_inline
C++ source. kag reads the source statically and builds it through its own build path
(kag.core.eval.orchestrator.single_file); scored with
`kag score --backend cpu --task examples/relu/cpu/model.py --solution examples/relu/kernelbench/cpu`.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_cpp_source = """
#include <cstdint>

static void relu_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu(), "relu_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "relu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
"""

relu = load_inline(name="relu_cpu", cpp_sources=relu_cpp_source, functions=["relu_forward"],
                   extra_cflags=["-O3", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu.relu_forward(x)
