// Torch-facing side of swish.cu: checks the input, allocates the output, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t swish_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor swish_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "swish_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "swish_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "swish_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = swish_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                 c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "swish_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void swish_bind(pybind11::module& m) {
  m.def("swish_forward", &swish_forward, "Swish (float4 grid-stride CUDA kernel)");
}

REGISTER_BINDING(swish, swish_bind);
