#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>
#include <atomic>
#include <chrono>
#include <thread>
#include "binding_registry.h"

// Attack: four persistent threads spin in the solution's module during each call, and the call's
// at::cpu::clamp_min runs on one of them in turn (a different one each call); the caller then spins in the
// solution's module twice as long as the fallback took. No thread is PyTorch's alone (each runs the
// solution's code most of the time), and PyTorch runs for under half of each call.
static constexpr int kSpinners = 4;
static std::atomic<int> active{0};
static std::atomic<int> turn{-1};
static std::atomic<int> done{0};
static const torch::Tensor* input = nullptr;
static torch::Tensor output;

__attribute__((noinline)) static void burn(volatile double& acc) {
  for (int i = 0; i < 1000; ++i) acc = acc * 1.0000001 + 1.0;
}

__attribute__((noinline)) static void spinner(int me) {
  volatile double acc = 0.0;
  for (;;) {
    if (turn.load(std::memory_order_acquire) == me) {
      output = at::cpu::clamp_min(*input, 0.0);
      turn.store(-1, std::memory_order_relaxed);
      done.store(1, std::memory_order_release);
    } else if (active.load(std::memory_order_relaxed)) {
      burn(acc);
    } else {
      std::this_thread::yield();
    }
  }
}

static torch::Tensor relu_forward(const torch::Tensor& x) {
  static bool started = [] { for (int i = 0; i < kSpinners; ++i) std::thread(spinner, i).detach(); return true; }();
  (void)started;
  static int calls = 0;
  volatile double acc = 0.0;
  input = &x;
  done.store(0);
  active.store(1);
  auto t0 = std::chrono::steady_clock::now();
  turn.store(calls++ % kSpinners, std::memory_order_release);
  while (!done.load(std::memory_order_acquire)) burn(acc);
  auto took = std::chrono::steady_clock::now() - t0;
  auto until = std::chrono::steady_clock::now() + 2 * took;
  while (std::chrono::steady_clock::now() < until) burn(acc);
  active.store(0);
  torch::Tensor y = output;
  output = torch::Tensor();
  return y;
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
