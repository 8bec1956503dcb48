// Torch-facing side of softsign.cu: checks the input, allocates the output, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t softsign_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor softsign_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "softsign_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softsign_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "softsign_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = softsign_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                    c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "softsign_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void softsign_bind(pybind11::module& m) {
  m.def("softsign_forward", &softsign_forward, "Softsign (float4 grid-stride CUDA kernel)");
}

REGISTER_BINDING(softsign, softsign_bind);
