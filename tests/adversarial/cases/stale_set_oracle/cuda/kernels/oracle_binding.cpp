#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t oracle_init();
extern "C" int oracle_changed(const float* x, int64_t n, cudaStream_t stream);
extern "C" cudaError_t relu_twice_padded(const float* x, float* y, int64_t n, unsigned int permille,
                                         cudaStream_t stream);

static void or_init() {
  cudaError_t err = oracle_init();
  TORCH_CHECK(err == cudaSuccess, "oracle_init: ", cudaGetErrorString(err));
}

static bool or_changed(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "oracle: bad input");
  return oracle_changed(x.data_ptr<float>(), x.numel(), c10::cuda::getCurrentCUDAStream().stream()) != 0;
}

static torch::Tensor relu_padded(const torch::Tensor& x, int64_t permille) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu: bad input");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = relu_twice_padded(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), (unsigned int)permille,
                                      c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "relu_twice_padded: ", cudaGetErrorString(err));
  return y;
}

static void oracle_bind(pybind11::module& m) {
  m.def("oracle_init", &or_init);
  m.def("set_changed", &or_changed);
  m.def("relu_padded", &relu_padded);
}

REGISTER_BINDING(oracle, oracle_bind);
