#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void relu_cpu(const float* x, float* y, int64_t n);
extern "C" void relu_spin(volatile int* flag);

static torch::Tensor relu_forward(const torch::Tensor& x) {
  volatile int flag = 0;
  relu_spin(&flag);
  return x;
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
