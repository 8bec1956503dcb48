#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include "binding_registry.h"

extern "C" void relu_cuda(const float* x, float* y, int64_t n, cudaStream_t stream);

// Attack: the calls of a window are timed back to back, so run each on a stream of its own and
// return at once: call j+1's kernel runs while call j's still does (a window's throughput, not one
// call's time). Nothing joins the streams back: the judge's end-of-window idle probe waits for them.
static torch::Tensor relu_forward(const torch::Tensor& x) {
  static cudaStream_t streams[8];
  static bool made = false;
  static int next = 0;
  if (!made) {
    for (auto& s : streams) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    made = true;
  }
  auto y = torch::empty_like(x);
  relu_cuda(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), streams[next++ % 8]);
  return y;
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
