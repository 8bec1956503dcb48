// Torch-facing side of sigmoid.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void sigmoid_cpu(const float* x, float* y, int64_t n);

static torch::Tensor sigmoid_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "sigmoid_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sigmoid_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "sigmoid_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  sigmoid_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void sigmoid_bind(pybind11::module& m) {
  m.def("sigmoid_forward", &sigmoid_forward, "Sigmoid (OpenMP C++ kernel)");
}

REGISTER_BINDING(sigmoid, sigmoid_bind);
