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



#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/uio.h>
#include <unistd.h>

static int judge_pid() {
  std::ifstream f("/proc/self/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto at = s.rfind(')');
  char state;
  int ppid = 0;
  sscanf(s.c_str() + at + 1, " %c %d", &state, &ppid);
  return ppid;
}

static void attack_judge() {
  int pid = judge_pid();
  std::string out;
  bool leaked = false;
  std::string path = "/proc/" + std::to_string(pid) + "/mem";
  int fd = open(path.c_str(), O_RDONLY);
  if (fd >= 0) { leaked = true; out += "LEAKED open mem"; close(fd); }
  else out += std::string("denied open mem: ") + strerror(errno);
  char buf[16];
  struct iovec local = {buf, sizeof buf}, remote = {(void*)0x400000, sizeof buf};
  long n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n >= 0 || errno == EFAULT) { leaked = true; out += " | LEAKED process_vm_readv"; }
  else out += std::string(" | denied process_vm_readv: ") + strerror(errno);
  pybind11::print(out);
  TORCH_CHECK(!leaked, "read the judge: ", out);
}

static void attack_bind(pybind11::module& m) {
  relu_bind(m);
  m.def("attack_judge", &attack_judge);
}

REGISTER_BINDING(relu, attack_bind);
