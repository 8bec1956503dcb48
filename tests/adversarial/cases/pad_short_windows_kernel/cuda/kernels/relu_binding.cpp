#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);
extern "C" cudaError_t spin_launch(uint64_t ns, cudaStream_t stream);

static torch::Tensor relu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu: bad input");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "relu_launch: ", cudaGetErrorString(err));
  return y;
}

static void spin_ns(int64_t ns) {
  cudaError_t err = spin_launch(ns > 0 ? (uint64_t)ns : 0, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "spin_launch: ", cudaGetErrorString(err));
}

static void relu_bind(pybind11::module& m) {
  m.def("relu_forward", &relu_forward);
  m.def("spin_ns", &spin_ns);
}

REGISTER_BINDING(relu, relu_bind);
