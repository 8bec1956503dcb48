// Torch-facing side of log_softmax.cpp: log_softmax over the last dim of a contiguous float32 tensor
// (the task's dim=1 of a 2-D input), viewed as (rows, cols).
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void log_softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols);

static torch::Tensor log_softmax_forward(const torch::Tensor& x, int64_t dim) {
  TORCH_CHECK(x.device().is_cpu(), "log_softmax_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "log_softmax_forward: x must be float32");
  TORCH_CHECK(x.dim() >= 1, "log_softmax_forward: x must have at least one dimension");
  TORCH_CHECK(x.is_contiguous(), "log_softmax_forward: x must be contiguous");
  if (dim < 0) dim += x.dim();
  TORCH_CHECK(dim == x.dim() - 1, "log_softmax_forward: only the last dimension is supported, got dim=", dim);
  torch::Tensor y = torch::empty_like(x);
  const int64_t cols = x.size(dim);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  log_softmax_cpu(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
  return y;
}

static void log_softmax_bind(pybind11::module& m) {
  m.def("log_softmax_forward", &log_softmax_forward, "Row log-softmax (OpenMP C++ kernel)");
}

REGISTER_BINDING(log_softmax, log_softmax_bind);
