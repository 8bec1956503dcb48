// Torch-facing side of gemm_divide_sum_scaling.cu: checks x (B, K) and W (H, K), allocates the
// (B, 1) output and the double workspaces, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" int64_t gemm_divide_sum_scaling_splits(int64_t rows);
extern "C" cudaError_t gemm_divide_sum_scaling_launch(const float* x, const float* w, float* y, double* partial,
                                                      double* wsum, int64_t batch, int64_t rows, int64_t cols,
                                                      double factor, cudaStream_t stream);

static torch::Tensor gemm_divide_sum_scaling_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                                     double scaling_factor) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "gemm_divide_sum_scaling_forward: x and weight must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
              "gemm_divide_sum_scaling_forward: x and weight must be float32");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
              "gemm_divide_sum_scaling_forward: expected x (B, K) and weight (H, K)");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), "gemm_divide_sum_scaling_forward: inputs must be contiguous");
  const int64_t batch = x.size(0), cols = x.size(1), rows = weight.size(0);
  torch::Tensor y = torch::empty({batch, 1}, x.options());
  auto dopts = x.options().dtype(torch::kFloat64);
  torch::Tensor partial = torch::empty({gemm_divide_sum_scaling_splits(rows) * cols}, dopts);
  torch::Tensor wsum = torch::empty({cols}, dopts);
  cudaError_t err = gemm_divide_sum_scaling_launch(
      x.data_ptr<float>(), weight.data_ptr<float>(), y.data_ptr<float>(), partial.data_ptr<double>(),
      wsum.data_ptr<double>(), batch, rows, cols, scaling_factor / 2.0, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "gemm_divide_sum_scaling_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void gemm_divide_sum_scaling_bind(pybind11::module& m) {
  m.def("gemm_divide_sum_scaling_forward", &gemm_divide_sum_scaling_forward,
        "sum(x @ W^T / 2, dim=1, keepdim) * scale as column-sum + GEMV (CUDA)");
}

REGISTER_BINDING(gemm_divide_sum_scaling, gemm_divide_sum_scaling_bind);
