// Torch-facing side of leaky_relu.cu: checks the input, allocates the output, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t leaky_relu_launch(const float* x, float* y, int64_t n, float negative_slope, cudaStream_t stream);

static torch::Tensor leaky_relu_forward(const torch::Tensor& x, double negative_slope) {
  TORCH_CHECK(x.is_cuda(), "leaky_relu_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "leaky_relu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "leaky_relu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = leaky_relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(negative_slope),
                                    c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "leaky_relu_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void leaky_relu_bind(pybind11::module& m) {
  m.def("leaky_relu_forward", &leaky_relu_forward, "LeakyReLU (float4 grid-stride CUDA kernel)");
}

REGISTER_BINDING(leaky_relu, leaky_relu_bind);
