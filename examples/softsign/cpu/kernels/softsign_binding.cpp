// Torch-facing side of softsign.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void softsign_cpu(const float* x, float* y, int64_t n);

static torch::Tensor softsign_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "softsign_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softsign_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "softsign_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  softsign_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void softsign_bind(pybind11::module& m) {
  m.def("softsign_forward", &softsign_forward, "Softsign (OpenMP C++ kernel)");
}

REGISTER_BINDING(softsign, softsign_bind);
