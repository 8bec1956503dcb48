#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void relu_cpu(const float* x, float* y, int64_t n, int passes);

static void run_relu(const torch::Tensor& x, torch::Tensor& y, int passes) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu: contiguous float32 input");
  relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), passes);
}

static torch::Tensor relu_forward(const torch::Tensor& x, int64_t passes) {
  torch::Tensor y = torch::empty_like(x);
  run_relu(x, y, (int)passes);
  return y;
}

static void relu_bind(pybind11::module& m) {
  m.def("relu_forward", &relu_forward, pybind11::arg("x"), pybind11::arg("passes") = 1);
}

REGISTER_BINDING(relu, relu_bind);
