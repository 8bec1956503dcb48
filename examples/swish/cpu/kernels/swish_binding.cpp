// Torch-facing side of swish.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void swish_cpu(const float* x, float* y, int64_t n);

static torch::Tensor swish_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "swish_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "swish_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "swish_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  swish_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void swish_bind(pybind11::module& m) {
  m.def("swish_forward", &swish_forward, "Swish (OpenMP C++ kernel)");
}

REGISTER_BINDING(swish, swish_bind);
