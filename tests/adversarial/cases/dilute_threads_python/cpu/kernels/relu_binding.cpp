#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>
#include <atomic>
#include <thread>
#include "binding_registry.h"

// Attack: PyTorch computes the output (at::cpu::clamp_min, no RecordFunction); threads that Python
// started call spin(), which releases the GIL and spins in this module while a call is running.
static std::atomic<int> active{0};

__attribute__((noinline)) static void spin_loop() {
  volatile double acc = 0.0;
  for (;;) {
    if (active.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 1000; ++i) acc = acc * 1.0000001 + 1.0;
    } else {
      std::this_thread::yield();
    }
  }
}

static void spin() {
  pybind11::gil_scoped_release released;
  spin_loop();
}

static torch::Tensor relu_forward(const torch::Tensor& x) {
  active.store(1);
  auto y = at::cpu::clamp_min(x, 0.0);
  active.store(0);
  return y;
}

static void relu_bind(pybind11::module& m) {
  m.def("relu_forward", &relu_forward);
  m.def("spin", &spin);
}

REGISTER_BINDING(relu, relu_bind);
