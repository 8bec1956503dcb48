// Torch-facing side of new_gelu.cu: checks the input, allocates the output, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t new_gelu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor new_gelu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "new_gelu_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "new_gelu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "new_gelu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = new_gelu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                    c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "new_gelu_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void new_gelu_bind(pybind11::module& m) {
  m.def("new_gelu_forward", &new_gelu_forward, "MinGPT's new GELU (float4 grid-stride CUDA kernel)");
}

REGISTER_BINDING(new_gelu, new_gelu_bind);
