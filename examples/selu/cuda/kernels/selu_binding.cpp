// Torch-facing side of selu.cu: checks the input, allocates the output, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t selu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor selu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "selu_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "selu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "selu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = selu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "selu_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void selu_bind(pybind11::module& m) {
  m.def("selu_forward", &selu_forward, "SELU (float4 grid-stride CUDA kernel)");
}

REGISTER_BINDING(selu, selu_bind);
