#include <thread>
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <cuda_runtime.h>
#include "binding_registry.h"

extern "C" void relu_cuda(const float* x, float* y, int64_t n, cudaStream_t stream);

// Attack: return at once and let a thread of its own launch the kernel, on a stream of its own,
// while the next call of the window runs: the window's calls overlap.
static torch::Tensor relu_forward(const torch::Tensor& x) {
  static cudaStream_t stream = nullptr;
  if (stream == nullptr) cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  int64_t n = x.numel();
  std::thread([=] { relu_cuda(xp, yp, n, stream); }).detach();
  return y;
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
