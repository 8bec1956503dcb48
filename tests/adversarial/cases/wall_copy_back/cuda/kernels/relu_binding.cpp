#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "binding_registry.h"

// The attack: the fatbin wall replaced libtorch_cuda's GPU code with read-only pages. A
// solution's build can read libtorch_cuda.so (the linker needs it), so it can carry that code in its own
// module (.incbin of the section's bytes) and write it back over the walled pages: make them writable
// (mprotect), or map fresh writable pages over them (MAP_FIXED), or unmap them, or write them through
// /proc/self/mem (the kernel forces such writes past a private mapping's protection). The bytes themselves
// are not carried here: whether the pages can be written at all is the question. Then run
// at::cuda::clamp_min through a pointer found with dlsym.
struct Vma { uintptr_t a, b; std::string perms, path; };

static std::vector<Vma> maps() {
  std::vector<Vma> out;
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return out;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b, off; char perms[8]; char dev[16]; unsigned long inode; char path[4096] = "";
    if (sscanf(line, "%lx-%lx %7s %lx %15s %lu %4095[^\n]", &a, &b, perms, &off, dev, &inode, path) >= 6)
      out.push_back({a, b, std::string(perms), std::string(path)});
  }
  fclose(f);
  return out;
}

static int copy_back() {
  auto v = maps();
  int writable = 0;
  for (size_t i = 1; i + 1 < v.size(); ++i) {
    const Vma &prev = v[i - 1], &wall = v[i], &next = v[i + 1];
    if (prev.path.find("libtorch_cuda") == std::string::npos || next.path != prev.path || wall.path == prev.path
        || prev.b != wall.a || wall.b != next.a || wall.perms.rfind("r--", 0) != 0) continue;  // the wall's read-only pages
    size_t len = wall.b - wall.a;
    int mem = open("/proc/self/mem", O_RDWR);
    if (mem < 0) {
      printf("/proc/self/mem refused: %s\n", strerror(errno));
    } else {
      const char bytes[8] = {'G', 'P', 'U', ' ', 'c', 'o', 'd', 'e'};
      ssize_t n = pwrite(mem, bytes, sizeof bytes, (off_t)(wall.a + len / 2));
      if (n != (ssize_t)sizeof bytes) printf("/proc/self/mem write refused: %s\n", strerror(errno));
      else if (memcmp((void*)(wall.a + len / 2), bytes, sizeof bytes) == 0) { printf("wall writable (/proc/self/mem)\n"); ++writable; }
      close(mem);
    }
    if (mprotect((void*)wall.a, len, PROT_READ | PROT_WRITE) != 0) {
      printf("mprotect refused: %s\n", strerror(errno));
    } else {
      printf("wall writable (mprotect)\n"); ++writable;
    }
    void* got = mmap((void*)wall.a, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (got == MAP_FAILED) printf("MAP_FIXED refused: %s\n", strerror(errno));
    else { printf("wall writable (MAP_FIXED)\n"); ++writable; }
    if (munmap((void*)wall.a, len) != 0) printf("munmap refused: %s\n", strerror(errno));
    else { printf("wall writable (munmap)\n"); ++writable; }
    fflush(stdout);
  }
  return writable;
}

using Fn = at::Tensor (*)(const at::Tensor&, const c10::Scalar&);

static torch::Tensor relu_forward(const torch::Tensor& x) {
  static int once = copy_back();
  (void)once;
  static Fn fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "_ZN2at4cuda9clamp_minERKNS_6TensorERKN3c106ScalarE"));
  TORCH_CHECK(fn != nullptr, "not found");
  return fn(x, c10::Scalar(0.0));
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
