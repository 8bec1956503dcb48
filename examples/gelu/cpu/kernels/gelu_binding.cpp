// Torch-facing side of gelu.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void gelu_cpu(const float* x, float* y, int64_t n);

static torch::Tensor gelu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "gelu_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gelu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "gelu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  gelu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void gelu_bind(pybind11::module& m) {
  m.def("gelu_forward", &gelu_forward, "GELU (OpenMP C++ kernel)");
}

REGISTER_BINDING(gelu, gelu_bind);
