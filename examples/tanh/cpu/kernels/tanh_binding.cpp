// Torch-facing side of tanh.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void tanh_cpu(const float* x, float* y, int64_t n);

static torch::Tensor tanh_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "tanh_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "tanh_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "tanh_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  tanh_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void tanh_bind(pybind11::module& m) {
  m.def("tanh_forward", &tanh_forward, "Tanh (OpenMP C++ kernel)");
}

REGISTER_BINDING(tanh, tanh_bind);
