#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>
#include "binding_registry.h"

// C = A @ B for row-major fp32 matrices through cuBLAS (column-major): C^T = B^T A^T.
static torch::Tensor matmul_forward(const torch::Tensor& A, const torch::Tensor& B) {
  TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.is_contiguous() && B.is_contiguous(), "matmul: bad input");
  TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "matmul: fp32 only");
  const int m = A.size(0), k = A.size(1), n = B.size(1);
  torch::Tensor C = torch::empty({m, n}, A.options());
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
  cublasSetStream(handle, c10::cuda::getCurrentCUDAStream().stream());
  cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t st = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B.data_ptr<float>(), n,
                                  A.data_ptr<float>(), k, &beta, C.data_ptr<float>(), n);
  TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed: ", int(st));
  return C;
}

static void matmul_bind(pybind11::module& m) { m.def("matmul_forward", &matmul_forward); }

REGISTER_BINDING(matmul, matmul_bind);
