// Torch-facing side of elu.cu: checks the input, allocates the output, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t elu_launch(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream);

static torch::Tensor elu_forward(const torch::Tensor& x, double alpha) {
  TORCH_CHECK(x.is_cuda(), "elu_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "elu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "elu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = elu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(alpha),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "elu_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void elu_bind(pybind11::module& m) {
  m.def("elu_forward", &elu_forward, "ELU (float4 grid-stride CUDA kernel)");
}

REGISTER_BINDING(elu, elu_bind);
