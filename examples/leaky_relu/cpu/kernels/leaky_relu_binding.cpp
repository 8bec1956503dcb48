// Torch-facing side of leaky_relu.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void leaky_relu_cpu(const float* x, float* y, int64_t n, float negative_slope);

static torch::Tensor leaky_relu_forward(const torch::Tensor& x, double negative_slope) {
  TORCH_CHECK(x.device().is_cpu(), "leaky_relu_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "leaky_relu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "leaky_relu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  leaky_relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(negative_slope));
  return y;
}

static void leaky_relu_bind(pybind11::module& m) {
  m.def("leaky_relu_forward", &leaky_relu_forward, "LeakyReLU (OpenMP C++ kernel)");
}

REGISTER_BINDING(leaky_relu, leaky_relu_bind);
