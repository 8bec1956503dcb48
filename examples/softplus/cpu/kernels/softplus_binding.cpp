// Torch-facing side of softplus.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void softplus_cpu(const float* x, float* y, int64_t n);

static torch::Tensor softplus_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "softplus_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softplus_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "softplus_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  softplus_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void softplus_bind(pybind11::module& m) {
  m.def("softplus_forward", &softplus_forward, "Softplus (OpenMP C++ kernel)");
}

REGISTER_BINDING(softplus, softplus_bind);
