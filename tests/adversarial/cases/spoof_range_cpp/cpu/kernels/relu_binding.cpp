#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void relu_cpu(const float* x, float* y, int64_t n, int passes);

static void run_relu(const torch::Tensor& x, torch::Tensor& y, int passes) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu: contiguous float32 input");
  relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), passes);
}

#include <ATen/record_function.h>

static torch::Tensor relu_forward(const torch::Tensor& x, int64_t passes) {
  {
    // a range named like the harness's, nested in the call's: it must not end the call's range
    RECORD_FUNCTION("kag::forward", std::vector<c10::IValue>());
  }
  pybind11::print("FALLBACK-TAKEN");
  return x.clamp_min(0);
}

static void relu_bind(pybind11::module& m) {
  m.def("relu_forward", &relu_forward, pybind11::arg("x"), pybind11::arg("passes") = 1);
}

REGISTER_BINDING(relu, relu_bind);
