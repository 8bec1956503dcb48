#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>
#include <atomic>
#include <thread>
#include "binding_registry.h"

// Attack: ATen's at::cpu::clamp_min on a fresh thread per call (a new thread id each time), while four
// threads spin in the solution's own module during the call.
static std::atomic<int> active{0};

__attribute__((noinline)) static void spin() {
  volatile double acc = 0.0;
  for (;;) {
    if (active.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 1000; ++i) acc = acc * 1.0000001 + 1.0;
    } else {
      std::this_thread::yield();
    }
  }
}

static torch::Tensor relu_forward(const torch::Tensor& x) {
  static bool started = [] { for (int i = 0; i < 4; ++i) std::thread(spin).detach(); return true; }();
  (void)started;
  torch::Tensor y;
  active.store(1);
  std::thread worker([&] { y = at::cpu::clamp_min(x, 0.0); });
  worker.join();
  active.store(0);
  return y;
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
