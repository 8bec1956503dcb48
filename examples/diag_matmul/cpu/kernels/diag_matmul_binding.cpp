// Torch-facing side of diag_matmul.cpp: checks A (N,) and B (N, M), allocates C, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void diag_matmul_cpu(const float* a, const float* b, float* c, int64_t n, int64_t m);

static torch::Tensor diag_matmul_forward(const torch::Tensor& A, const torch::Tensor& B) {
  TORCH_CHECK(A.device().is_cpu() && B.device().is_cpu(), "diag_matmul_forward: A and B must be CPU tensors");
  TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
              "diag_matmul_forward: A and B must be float32");
  TORCH_CHECK(A.dim() == 1 && B.dim() == 2 && B.size(0) == A.size(0),
              "diag_matmul_forward: expected A (N,) and B (N, M)");
  TORCH_CHECK(A.is_contiguous() && B.is_contiguous(), "diag_matmul_forward: A and B must be contiguous");
  torch::Tensor C = torch::empty_like(B);
  diag_matmul_cpu(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), B.size(0), B.size(1));
  return C;
}

static void diag_matmul_bind(pybind11::module& m) {
  m.def("diag_matmul_forward", &diag_matmul_forward, "diag(A) @ B as a row-scaling OpenMP kernel");
}

REGISTER_BINDING(diag_matmul, diag_matmul_bind);
