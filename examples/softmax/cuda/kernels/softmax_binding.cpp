// Torch-facing side of softmax.cu: softmax over dim 1 of a 2-D float32 tensor.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

static torch::Tensor softmax_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "softmax_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_forward: x must be float32");
  TORCH_CHECK(x.dim() == 2, "softmax_forward: x must be 2-D (softmax over dim 1)");
  TORCH_CHECK(x.is_contiguous(), "softmax_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = softmax_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1),
                                   c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "softmax_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void softmax_bind(pybind11::module& m) {
  m.def("softmax_forward", &softmax_forward, "Row softmax (online max/sum, one block per row)");
}

REGISTER_BINDING(softmax, softmax_bind);
