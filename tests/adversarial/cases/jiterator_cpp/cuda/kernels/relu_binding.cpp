#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/ops/special_bessel_j0.h>
#include "binding_registry.h"

static torch::Tensor bessel_forward(const torch::Tensor& x) {
  return at::special_bessel_j0(x);
}

static void bessel_bind(pybind11::module& m) { m.def("bessel_forward", &bessel_forward); }

REGISTER_BINDING(bessel, bessel_bind);
