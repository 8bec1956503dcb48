#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>
#include "binding_registry.h"

extern "C" void relu_cpu(const float* x, float* y, int64_t n);

// Attack at the absolute count's floor: no thread spins; PyTorch (at::cpu::clamp_min_out) computes the first
// tenth of the output on the calling thread, the solution's own loop the rest.
static torch::Tensor relu_forward(const torch::Tensor& x) {
  auto xf = x.contiguous().view({-1});
  auto y = torch::empty_like(xf);
  int64_t n = xf.numel(), part = n / 10;
  auto out = y.narrow(0, 0, part);
  at::cpu::clamp_min_out(out, xf.narrow(0, 0, part), 0.0);
  relu_cpu(xf.data_ptr<float>() + part, y.data_ptr<float>() + part, n - part);
  return y.view(x.sizes());
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
