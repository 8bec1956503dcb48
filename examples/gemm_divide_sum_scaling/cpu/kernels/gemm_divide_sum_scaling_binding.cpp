// Torch-facing side of gemm_divide_sum_scaling.cpp: checks x (B, K) and W (H, K), allocates the
// (B, 1) output, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void gemm_divide_sum_scaling_cpu(const float* x, const float* w, float* y, int64_t batch, int64_t rows,
                                            int64_t cols, double factor);

static torch::Tensor gemm_divide_sum_scaling_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                                     double scaling_factor) {
  TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu(),
              "gemm_divide_sum_scaling_forward: x and weight must be CPU tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
              "gemm_divide_sum_scaling_forward: x and weight must be float32");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
              "gemm_divide_sum_scaling_forward: expected x (B, K) and weight (H, K)");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), "gemm_divide_sum_scaling_forward: inputs must be contiguous");
  torch::Tensor y = torch::empty({x.size(0), 1}, x.options());
  gemm_divide_sum_scaling_cpu(x.data_ptr<float>(), weight.data_ptr<float>(), y.data_ptr<float>(), x.size(0),
                              weight.size(0), x.size(1), scaling_factor / 2.0);
  return y;
}

static void gemm_divide_sum_scaling_bind(pybind11::module& m) {
  m.def("gemm_divide_sum_scaling_forward", &gemm_divide_sum_scaling_forward,
        "sum(x @ W^T / 2, dim=1, keepdim) * scale as column-sum + GEMV (OpenMP)");
}

REGISTER_BINDING(gemm_divide_sum_scaling, gemm_divide_sum_scaling_bind);
