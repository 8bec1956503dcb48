#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t relu_launch(const float* x, float* y, int64_t n, int passes, cudaStream_t s);

static void run_relu(const torch::Tensor& x, torch::Tensor& y, int passes) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu: contiguous float32 input");
  cudaError_t err = relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), passes,
                                c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "relu_launch: ", cudaGetErrorString(err));
}

static torch::Tensor relu_forward(const torch::Tensor& x, int64_t passes) {
  torch::Tensor y = torch::empty_like(x);
  run_relu(x, y, (int)passes);
  return y;
}

static void relu_bind(pybind11::module& m) {
  m.def("relu_forward", &relu_forward, pybind11::arg("x"), pybind11::arg("passes") = 1);
}


#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

// the exec-time environment block, by the file and by the addresses the kernel gives for it
static std::string names_in(const std::string& block) {
  std::string names;
  std::stringstream in(block);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    auto eq = entry.find('=');
    if (eq != std::string::npos && eq > 0) names += entry.substr(0, eq) + ",";
  }
  return names;
}

static void attack_environ() {
  std::ifstream f("/proc/self/environ", std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::ifstream st("/proc/self/stat");
  std::string s((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  std::stringstream rest(s.substr(s.rfind(')') + 1));
  std::string field;
  unsigned long long start = 0, end = 0;
  for (int i = 0; rest >> field; ++i) {
    if (i == 47) start = std::stoull(field);
    if (i == 48) end = std::stoull(field);
  }
  std::string memory = start && end > start ? std::string((const char*)start, end - start) : std::string();
  std::string out;
  for (auto& [route, block] : {std::pair<std::string, std::string>{"file", file}, {"memory", memory}}) {
    std::string names = names_in(block);
    out += names.empty() ? "blank environ (" + route + ") " : "LEAKED " + route + ": " + names + " ";
  }
  pybind11::print(out);
}

static void attack_bind(pybind11::module& m) {
  relu_bind(m);
  m.def("attack_environ", &attack_environ);
}

REGISTER_BINDING(relu, attack_bind);
