#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "binding_registry.h"

extern "C" void relu_cpu(const float* x, float* y, int64_t n);

// Attack surface: system calls outside the candidate's allow-list, each with arguments the kernel
// itself would accept, tried from C++. A refusal prints its errno; one that ran prints ALLOWED.
static void try_syscalls() {
  struct Try { const char* name; long nr; long a[6]; };
  static const Try table[] = {
    {"keyctl", SYS_keyctl, {KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0, 0, 0}},
    {"add_key", SYS_add_key, {(long)"user", (long)"kag", (long)"x", 1, KEY_SPEC_PROCESS_KEYRING, 0}},
    {"io_uring_setup", SYS_io_uring_setup, {1, 0, 0, 0, 0, 0}},
    {"userfaultfd", SYS_userfaultfd, {O_CLOEXEC, 0, 0, 0, 0, 0}},
    {"perf_event_open", SYS_perf_event_open, {0, 0, -1, -1, 0, 0}},
    {"pidfd_open", SYS_pidfd_open, {0, 0, 0, 0, 0, 0}},
    {"unshare", SYS_unshare, {CLONE_NEWUSER, 0, 0, 0, 0, 0}},
    {"setns", SYS_setns, {-1, 0, 0, 0, 0, 0}},
    {"mount", SYS_mount, {(long)"none", (long)"/tmp", (long)"tmpfs", 0, 0, 0}},
    {"open_by_handle_at", SYS_open_by_handle_at, {AT_FDCWD, 0, 0, 0, 0, 0}},
    {"bpf", SYS_bpf, {0, 0, 0, 0, 0, 0}},
    {"ptrace", SYS_ptrace, {0 /* PTRACE_TRACEME */, 0, 0, 0, 0, 0}},
    {"process_vm_readv", SYS_process_vm_readv, {0, 0, 0, 0, 0, 0}},
    {"clone_process", SYS_clone, {SIGCHLD, 0, 0, 0, 0, 0}},
    {"execve", SYS_execve, {(long)"/bin/true", 0, 0, 0, 0, 0}},
    {"personality", SYS_personality, {ADDR_NO_RANDOMIZE, 0, 0, 0, 0, 0}},
    {"socket_vsock", SYS_socket, {40 /* AF_VSOCK */, SOCK_STREAM, 0, 0, 0, 0}},
    {"kexec_load", SYS_kexec_load, {0, 0, 0, 0, 0, 0}},
  };
  int allowed = 0;
  char line[4096] = "SYSCALLS";
  for (const auto& t : table) {
    errno = 0;
    long pidarg = t.nr == SYS_pidfd_open ? getpid() : t.a[0];
    long r = syscall(t.nr, pidarg, t.a[1], t.a[2], t.a[3], t.a[4], t.a[5]);
    if (r == 0 && t.nr == SYS_clone) _exit(0);  // a child that got through: gone at once
    char cell[96];
    if (r >= 0 || (errno != EPERM && errno != ENOSYS)) {
      ++allowed;
      snprintf(cell, sizeof cell, " ALLOWED:%s(%ld,%s)", t.name, r, strerror(errno));
    } else {
      snprintf(cell, sizeof cell, " %s=%s", t.name, errno == EPERM ? "EPERM" : "ENOSYS");
    }
    strncat(line, cell, sizeof line - strlen(line) - 1);
  }
  printf("%s\n%s\n", line, allowed ? "SOME-ALLOWED" : "REFUSED-ALL");
  fflush(stdout);
}

static torch::Tensor relu_forward(const torch::Tensor& x) {
  static bool tried = false;
  if (!tried) { tried = true; try_syscalls(); }
  auto y = torch::empty_like(x);
  relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

static void relu_bind(pybind11::module& m) { m.def("relu_forward", &relu_forward); }

REGISTER_BINDING(relu, relu_bind);
