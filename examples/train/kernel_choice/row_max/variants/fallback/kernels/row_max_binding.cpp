// Torch-facing side: checks the input, allocates one value per row, calls the C kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"

extern "C" void row_max_cpu(const float* x, float* y, int64_t rows, int64_t cols);

static torch::Tensor row_max_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu() && x.dim() == 2, "row_max_forward: x must be a 2-D CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "row_max_forward: x must be contiguous float32");
  torch::Tensor y = torch::empty({x.size(0)}, x.options());
  row_max_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
  return y;
}

static void row_max_bind(pybind11::module& m) {
  m.def("row_max_forward", &row_max_forward, "largest value of each row");
}

REGISTER_BINDING(row_max, row_max_bind);
