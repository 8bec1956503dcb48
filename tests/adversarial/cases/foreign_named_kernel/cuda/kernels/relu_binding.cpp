#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/ops/clamp_min_cuda_dispatch.h>
#include "binding_registry.h"

// Attack: PyTorch's clamp_min kernel does the work (at::cuda::, no dispatcher), and kernels/ declares
// dummies named like PyTorch's kernels, so a provenance check by names would call them the solution's.
static torch::Tensor relu_forward(const torch::Tensor& x) { return at::cuda::clamp_min(x, 0.0); }

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
