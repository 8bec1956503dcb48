// Torch-facing side of matrix_scalar.cu: checks the input, allocates the output, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t matrix_scalar_launch(const float* x, float* y, int64_t n, float s, cudaStream_t stream);

static torch::Tensor matrix_scalar_forward(const torch::Tensor& x, double s) {
  TORCH_CHECK(x.is_cuda(), "matrix_scalar_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "matrix_scalar_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "matrix_scalar_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = matrix_scalar_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(s),
                                         c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "matrix_scalar_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void matrix_scalar_bind(pybind11::module& m) {
  m.def("matrix_scalar_forward", &matrix_scalar_forward, "Matrix-scalar multiplication (float4 grid-stride CUDA kernel)");
}

REGISTER_BINDING(matrix_scalar, matrix_scalar_bind);
