// Torch-facing side of mean_reduction.cpp: torch.mean(x, dim) for a contiguous float32 x.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void mean_reduction_cpu(const float* x, float* y, int64_t outer, int64_t reduce, int64_t inner);

static torch::Tensor mean_reduction_forward(const torch::Tensor& x, int64_t dim) {
  TORCH_CHECK(x.device().is_cpu(), "mean_reduction_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "mean_reduction_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "mean_reduction_forward: x must be contiguous");
  TORCH_CHECK(x.dim() >= 1, "mean_reduction_forward: x must have at least one dimension");
  if (dim < 0) dim += x.dim();
  TORCH_CHECK(dim >= 0 && dim < x.dim(), "mean_reduction_forward: dim out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.erase(out_shape.begin() + dim);
  torch::Tensor y = torch::empty(out_shape, x.options());
  mean_reduction_cpu(x.data_ptr<float>(), y.data_ptr<float>(), outer, x.size(dim), inner);
  return y;
}

static void mean_reduction_bind(pybind11::module& m) {
  m.def("mean_reduction_forward", &mean_reduction_forward, "Mean over one dim (OpenMP C++ kernel)");
}

REGISTER_BINDING(mean_reduction, mean_reduction_bind);
