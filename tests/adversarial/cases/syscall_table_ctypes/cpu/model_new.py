"""Attack surface: system calls outside the candidate's allow-list, through ctypes (libc's syscall),
each with arguments the kernel itself would accept. A refusal prints its errno; one that ran
prints ALLOWED."""
import ctypes
import errno
import os

import torch
import torch.nn as nn

import cuda_extension

# x86_64 numbers (aarch64 lacks fork/vfork; the table skips what it does not know)
TABLE = {"keyctl": (250, (0, -3)), "io_uring_setup": (425, (1, 0)), "userfaultfd": (323, (0o2000000,)),
         "perf_event_open": (298, (0, 0, -1, -1, 0)), "pidfd_open": (434, ("self", 0)), "unshare": (272, (0x10000000,)),
         "mount": (165, (0, 0, 0, 0, 0)), "bpf": (321, (0, 0, 0)), "ptrace": (101, (0, 0, 0, 0)),
         "fork": (57, ()), "vfork_as_clone": (56, (17, 0, 0, 0, 0)), "kexec_load": (246, (0, 0, 0, 0))}


def try_syscalls() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    cells, allowed = [], 0
    for name, (nr, args) in TABLE.items():
        args = [os.getpid() if a == "self" else a for a in args]
        r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
        err = ctypes.get_errno()
        if r == 0 and nr in (57, 56):
            os._exit(0)  # a child that got through: gone at once
        if r >= 0 or err not in (errno.EPERM, errno.ENOSYS):
            allowed += 1
            cells.append(f"ALLOWED:{name}({r},{errno.errorcode.get(err, err)})")
        else:
            cells.append(f"{name}={errno.errorcode[err]}")
    print("SYSCALLS " + " ".join(cells), flush=True)
    print("SOME-ALLOWED" if allowed else "REFUSED-ALL", flush=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.tried = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.tried:
            self.tried = True
            try_syscalls()
        return cuda_extension.relu_forward(x)
