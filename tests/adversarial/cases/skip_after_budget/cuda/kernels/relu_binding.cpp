#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" void relu_cuda(const float* x, float* y, int64_t n, cudaStream_t stream);

// Attack: a fixed budget of secret checks is spent early; after the 50th call, skip the work
// (return the freshly allocated, unwritten output).
static torch::Tensor relu_forward(const torch::Tensor& x) {
  static int calls = 0;
  auto y = torch::empty_like(x);
  if (++calls > 50) return y;
  relu_cuda(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), c10::cuda::getCurrentCUDAStream());
  return y;
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
