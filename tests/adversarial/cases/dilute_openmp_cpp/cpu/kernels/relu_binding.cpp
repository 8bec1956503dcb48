#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>
#include <omp.h>
#include <atomic>
#include "binding_registry.h"

// Attack: an OpenMP team of five; thread 0 has PyTorch compute the output (at::cpu::clamp_min), the
// other four spin in this module's own code until it is done.
__attribute__((noinline)) static void spin_until(const std::atomic<int>& done) {
  volatile double acc = 0.0;
  while (!done.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 1000; ++i) acc = acc * 1.0000001 + 1.0;
  }
}

static torch::Tensor relu_forward(const torch::Tensor& x) {
  torch::Tensor y;
  std::atomic<int> done{0};
#pragma omp parallel num_threads(5)
  {
    if (omp_get_thread_num() == 0) {
      y = at::cpu::clamp_min(x, 0.0);
      done.store(1);
    } else {
      spin_until(done);
    }
  }
  if (!y.defined()) y = at::cpu::clamp_min(x, 0.0);  // a team of one (OpenMP off): still PyTorch's
  return y;
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
