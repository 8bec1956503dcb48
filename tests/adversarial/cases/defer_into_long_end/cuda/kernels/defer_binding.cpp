#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t defer_init();
extern "C" void defer_abort(unsigned int gen);
extern "C" cudaError_t relu_twice_guarded(const float* x, float* y, int64_t n, int slot, unsigned int gen,
                                          cudaStream_t stream);
extern "C" cudaError_t relu_twice_finish(const float* x, float* y, int64_t n, int slot, cudaStream_t stream);
extern "C" cudaError_t defer_reset(int count, cudaStream_t stream);

static void df_init() {
  cudaError_t err = defer_init();
  TORCH_CHECK(err == cudaSuccess, "defer_init: ", cudaGetErrorString(err));
}

static void abort_window(int64_t gen) { defer_abort((unsigned int)gen); }

static torch::Tensor relu_guarded(const torch::Tensor& x, int64_t slot, int64_t gen) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu: bad input");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = relu_twice_guarded(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), (int)slot,
                                       (unsigned int)gen, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "relu_twice_guarded: ", cudaGetErrorString(err));
  return y;
}

static void df_finish(const torch::Tensor& x, const torch::Tensor& y, int64_t slot) {
  cudaError_t err = relu_twice_finish(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), (int)slot,
                                      c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "relu_twice_finish: ", cudaGetErrorString(err));
}

static void df_reset(int64_t count) {
  cudaError_t err = defer_reset((int)count, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "defer_reset: ", cudaGetErrorString(err));
}

static void defer_bind(pybind11::module& m) {
  m.def("defer_init", &df_init);
  m.def("defer_abort", &abort_window);
  m.def("relu_guarded", &relu_guarded);
  m.def("relu_finish", &df_finish);
  m.def("defer_reset", &df_reset);
}

REGISTER_BINDING(defer, defer_bind);
