#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <vector>
#include "binding_registry.h"
extern "C" void chain_cpu(const float* x, float* y, int64_t n);
extern "C" int64_t recover_seed(const float* x, int64_t n);
extern "C" void precompute(uint32_t seed0, int64_t count, int64_t n, float** ys, float* samples, int64_t ns);
extern "C" int matches(const float* x, int64_t n, const float* samples, int64_t ns);

static torch::Tensor chain_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32);
  torch::Tensor y = torch::empty_like(x);
  chain_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
static int64_t recover(const torch::Tensor& x) { return recover_seed(x.data_ptr<float>(), x.numel()); }
static std::vector<torch::Tensor> precomp(int64_t seed0, int64_t count, const torch::Tensor& like, int64_t ns) {
  std::vector<torch::Tensor> out;
  std::vector<float*> ptrs;
  for (int64_t k = 0; k < count; k++) { out.push_back(torch::empty_like(like)); ptrs.push_back(out.back().data_ptr<float>()); }
  torch::Tensor samples = torch::empty({count, ns}, like.options());
  precompute((uint32_t)seed0, count, like.numel(), ptrs.data(), samples.data_ptr<float>(), ns);
  out.push_back(samples);
  return out;
}
static bool match(const torch::Tensor& x, const torch::Tensor& samples, int64_t k) {
  const int64_t ns = samples.size(1);
  return matches(x.data_ptr<float>(), x.numel(), samples.data_ptr<float>() + k * ns, ns);
}
static void chain_bind(pybind11::module& m) {
  m.def("chain_forward", &chain_forward);
  m.def("recover_seed", &recover);
  m.def("precompute", &precomp);
  m.def("matches", &match);
}
REGISTER_BINDING(chain, chain_bind);
