#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);
extern "C" cudaError_t tail_init();
extern "C" void tail_cancel(unsigned long long seq);
extern "C" cudaError_t tail_stamp(cudaStream_t stream);
extern "C" cudaError_t tail_pad(unsigned long long seq, unsigned int permille, unsigned long long cap_ns,
                                cudaStream_t stream);

static torch::Tensor relu_twice(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu: bad input");
  torch::Tensor y = torch::empty_like(x);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  for (int pass = 0; pass < 2; ++pass) {  // twice the honest work
    cudaError_t err = relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), stream);
    TORCH_CHECK(err == cudaSuccess, "relu_launch: ", cudaGetErrorString(err));
  }
  return y;
}

static void tp_init() {
  cudaError_t err = tail_init();
  TORCH_CHECK(err == cudaSuccess, "tail_init: ", cudaGetErrorString(err));
}

static void tp_cancel(int64_t seq) { tail_cancel((unsigned long long)seq); }

static void tp_stamp() {
  cudaError_t err = tail_stamp(c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "tail_stamp: ", cudaGetErrorString(err));
}

static void tp_pad(int64_t seq, int64_t permille, int64_t cap_ns) {
  cudaError_t err = tail_pad((unsigned long long)seq, (unsigned int)permille, (unsigned long long)cap_ns,
                             c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "tail_pad: ", cudaGetErrorString(err));
}

static void tailpad_bind(pybind11::module& m) {
  m.def("relu_twice", &relu_twice);
  m.def("tail_init", &tp_init);
  m.def("tail_cancel", &tp_cancel);
  m.def("tail_stamp", &tp_stamp);
  m.def("tail_pad", &tp_pad);
}

REGISTER_BINDING(tailpad, tailpad_bind);
