// Torch-facing side of selu.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void selu_cpu(const float* x, float* y, int64_t n);

static torch::Tensor selu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "selu_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "selu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "selu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  selu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void selu_bind(pybind11::module& m) {
  m.def("selu_forward", &selu_forward, "SELU (OpenMP C++ kernel)");
}

REGISTER_BINDING(selu, selu_bind);
