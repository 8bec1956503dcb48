#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>
#include <atomic>
#include <chrono>
#include <thread>
#include "binding_registry.h"

extern "C" void relu_cpu(const float* x, float* y, int64_t n);

// Attack: rotate_spinners_cpp's four spinning threads, but the one whose turn it is runs
// at::cpu::clamp_min_out on the first fifth of the tensor only; the caller computes the rest with the
// solution's own loop, then spins twice as long as the whole took. PyTorch does a fifth of eager's work.
static constexpr int kSpinners = 4;
static std::atomic<int> active{0};
static std::atomic<int> turn{-1};
static std::atomic<int> done{0};
static torch::Tensor in_part, out_part;

__attribute__((noinline)) static void burn(volatile double& acc) {
  for (int i = 0; i < 1000; ++i) acc = acc * 1.0000001 + 1.0;
}

__attribute__((noinline)) static void spinner(int me) {
  volatile double acc = 0.0;
  for (;;) {
    if (turn.load(std::memory_order_acquire) == me) {
      at::cpu::clamp_min_out(out_part, in_part, 0.0);
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
  auto xf = x.contiguous().view({-1});
  auto y = torch::empty_like(xf);
  int64_t n = xf.numel(), part = n / 5;
  in_part = xf.narrow(0, 0, part);
  out_part = y.narrow(0, 0, part);
  done.store(0);
  active.store(1);
  auto t0 = std::chrono::steady_clock::now();
  turn.store(calls++ % kSpinners, std::memory_order_release);
  relu_cpu(xf.data_ptr<float>() + part, y.data_ptr<float>() + part, n - part);
  while (!done.load(std::memory_order_acquire)) burn(acc);
  auto until = std::chrono::steady_clock::now() + 2 * (std::chrono::steady_clock::now() - t0);
  while (std::chrono::steady_clock::now() < until) burn(acc);
  active.store(0);
  in_part = torch::Tensor();
  out_part = torch::Tensor();
  return y.view(x.sizes());
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
