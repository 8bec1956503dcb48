// Torch-facing side of relu.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void relu_cpu(const float* x, float* y, int64_t n);

static torch::Tensor relu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "relu_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "relu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void relu_bind(pybind11::module& m) {
  m.def("relu_forward", &relu_forward, "ReLU (OpenMP C++ kernel)");
}

REGISTER_BINDING(relu, relu_bind);
