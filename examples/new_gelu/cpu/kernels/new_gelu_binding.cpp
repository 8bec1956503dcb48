// Torch-facing side of new_gelu.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void new_gelu_cpu(const float* x, float* y, int64_t n);

static torch::Tensor new_gelu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "new_gelu_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "new_gelu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "new_gelu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  new_gelu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void new_gelu_bind(pybind11::module& m) {
  m.def("new_gelu_forward", &new_gelu_forward, "MinGPT's new GELU (OpenMP C++ kernel)");
}

REGISTER_BINDING(new_gelu, new_gelu_bind);
