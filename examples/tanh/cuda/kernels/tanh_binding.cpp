// Torch-facing side of tanh.cu: checks the input, allocates the output, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t tanh_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor tanh_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "tanh_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "tanh_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "tanh_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = tanh_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                              c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "tanh_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void tanh_bind(pybind11::module& m) {
  m.def("tanh_forward", &tanh_forward, "Tanh (float4 grid-stride CUDA kernel)");
}

REGISTER_BINDING(tanh, tanh_bind);
