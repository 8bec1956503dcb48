// Torch-facing side of hardsigmoid.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void hardsigmoid_cpu(const float* x, float* y, int64_t n);

static torch::Tensor hardsigmoid_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "hardsigmoid_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "hardsigmoid_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "hardsigmoid_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  hardsigmoid_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void hardsigmoid_bind(pybind11::module& m) {
  m.def("hardsigmoid_forward", &hardsigmoid_forward, "HardSigmoid (OpenMP C++ kernel)");
}

REGISTER_BINDING(hardsigmoid, hardsigmoid_bind);
