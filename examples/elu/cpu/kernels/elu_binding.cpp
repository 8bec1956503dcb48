// Torch-facing side of elu.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void elu_cpu(const float* x, float* y, int64_t n, float alpha);

static torch::Tensor elu_forward(const torch::Tensor& x, double alpha) {
  TORCH_CHECK(x.device().is_cpu(), "elu_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "elu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "elu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  elu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(alpha));
  return y;
}

static void elu_bind(pybind11::module& m) {
  m.def("elu_forward", &elu_forward, "ELU (OpenMP C++ kernel)");
}

REGISTER_BINDING(elu, elu_bind);
