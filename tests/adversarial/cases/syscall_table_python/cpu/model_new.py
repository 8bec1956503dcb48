"""Attack surface: what the Python standard library offers outside the candidate's allow-list:
processes (fork, posix_spawn, subprocess, exec), other namespaces, a vsock socket, a pidfd. A refusal prints its errno; one that ran prints ALLOWED."""
import errno
import os
import socket
import subprocess

import torch
import torch.nn as nn

import cuda_extension


def attempt(name, fn, cells):
    try:
        r = fn()
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.ENOSYS):
            cells.append(f"{name}={errno.errorcode[exc.errno]}")
            return 0
        cells.append(f"ALLOWED:{name}({errno.errorcode.get(exc.errno, exc.errno)})")
        return 1
    if r == 0 and name == "fork":
        os._exit(0)
    cells.append(f"ALLOWED:{name}({r})")
    return 1


def try_calls() -> None:
    cells = []
    allowed = sum([
        attempt("fork", os.fork, cells),
        attempt("posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}), cells),
        attempt("subprocess", lambda: subprocess.run(["/bin/true"]).returncode, cells),
        attempt("vsock", lambda: socket.socket(40, socket.SOCK_STREAM).fileno(), cells),
        attempt("pidfd_open", lambda: os.pidfd_open(os.getpid()), cells),
        attempt("sched_setns", lambda: os.setns(os.open("/proc/self/ns/net", os.O_RDONLY), 0)
                if hasattr(os, "setns") else (_ for _ in ()).throw(OSError(errno.EPERM, "no setns")), cells),
        attempt("execv", lambda: os.execv("/bin/true", ["true"]), cells),
    ])
    print("SYSCALLS " + " ".join(cells), flush=True)
    print("SOME-ALLOWED" if allowed else "REFUSED-ALL", flush=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.tried = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.tried:
            self.tried = True
            try_calls()
        return cuda_extension.relu_forward(x)
