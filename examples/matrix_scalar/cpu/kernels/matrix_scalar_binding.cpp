// Torch-facing side of matrix_scalar.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void matrix_scalar_cpu(const float* x, float* y, int64_t n, float s);

static torch::Tensor matrix_scalar_forward(const torch::Tensor& x, double s) {
  TORCH_CHECK(x.device().is_cpu(), "matrix_scalar_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "matrix_scalar_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "matrix_scalar_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  matrix_scalar_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(s));
  return y;
}

static void matrix_scalar_bind(pybind11::module& m) {
  m.def("matrix_scalar_forward", &matrix_scalar_forward, "Matrix-scalar multiplication (OpenMP C++ kernel)");
}

REGISTER_BINDING(matrix_scalar, matrix_scalar_bind);
