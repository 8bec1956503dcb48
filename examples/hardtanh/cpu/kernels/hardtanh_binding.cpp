// Torch-facing side of hardtanh.cpp: checks the input, allocates the output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void hardtanh_cpu(const float* x, float* y, int64_t n, float min_val, float max_val);

static torch::Tensor hardtanh_forward(const torch::Tensor& x, double min_val, double max_val) {
  TORCH_CHECK(x.device().is_cpu(), "hardtanh_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "hardtanh_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "hardtanh_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  hardtanh_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(min_val), static_cast<float>(max_val));
  return y;
}

static void hardtanh_bind(pybind11::module& m) {
  m.def("hardtanh_forward", &hardtanh_forward, "HardTanh (OpenMP C++ kernel)");
}

REGISTER_BINDING(hardtanh, hardtanh_bind);
