// Torch-facing side of diag_matmul.cu: checks A (N,) and B (N, M), allocates C, launches on torch's stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t diag_matmul_launch(const float* a, const float* b, float* c, int64_t n, int64_t m,
                                          cudaStream_t stream);

static torch::Tensor diag_matmul_forward(const torch::Tensor& A, const torch::Tensor& B) {
  TORCH_CHECK(A.is_cuda() && B.is_cuda(), "diag_matmul_forward: A and B must be CUDA tensors");
  TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
              "diag_matmul_forward: A and B must be float32");
  TORCH_CHECK(A.dim() == 1 && B.dim() == 2 && B.size(0) == A.size(0),
              "diag_matmul_forward: expected A (N,) and B (N, M)");
  TORCH_CHECK(A.is_contiguous() && B.is_contiguous(), "diag_matmul_forward: A and B must be contiguous");
  torch::Tensor C = torch::empty_like(B);
  cudaError_t err = diag_matmul_launch(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                       B.size(0), B.size(1), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "diag_matmul_launch failed: ", cudaGetErrorString(err));
  return C;
}

static void diag_matmul_bind(pybind11::module& m) {
  m.def("diag_matmul_forward", &diag_matmul_forward, "diag(A) @ B as a row-scaling CUDA kernel");
}

REGISTER_BINDING(diag_matmul, diag_matmul_bind);
