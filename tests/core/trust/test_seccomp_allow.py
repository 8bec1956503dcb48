"""The candidate's seccomp allow-list (kag.core.trust.seccomp_allow): system calls outside it are
refused, with arguments the kernel itself would accept, while what a candidate needs still works
(threads, its own signals, files, sockets of its own families, torch)."""

from __future__ import annotations

import ctypes
import os
import platform

import pytest

from kag.core.trust import seccomp_allow
from tests.core.trust.forked import in_forked_child, syscall

pytestmark = pytest.mark.skipif(not seccomp_allow.available() or platform.machine() != "x86_64",
                                reason="needs libseccomp on x86_64")

# (name, number, arguments): calls the kernel would run for an unprivileged process
REFUSED = [("keyctl", 250, (0, -3)), ("add_key", 248, (0, 0, 0, 0, -2)), ("io_uring_setup", 425, (1, 0)),
           ("userfaultfd", 323, (0o2000000,)), ("perf_event_open", 298, (0, 0, -1, -1, 0)),
           ("pidfd_open", 434, ("self", 0)), ("unshare", 272, (0x10000000,)), ("mount", 165, (0, 0, 0, 0, 0)),
           ("open_by_handle_at", 304, (-100, 0, 0)), ("bpf", 321, (0, 0, 0)), ("ptrace", 101, (0, 0, 0, 0)),
           ("process_vm_readv", 310, ("self", 0, 0, 0, 0, 0)), ("fork", 57, ()), ("vfork", 58, ()),
           ("clone_process", 56, (17, 0, 0, 0, 0)), ("socket_vsock", 41, (40, 1, 0)), ("kexec_load", 246, (0, 0, 0, 0)),
           ("setns", 308, (-1, 0)), ("tkill", 200, ("self", 0)), ("personality", 135, (0x0040000,)),
           # outliving the judge (PR_SET_PDEATHSIG cleared), also with the option's upper half set
           ("prctl_pdeathsig", 157, (1, 0)), ("prctl_pdeathsig_high", 157, (0x100000001, 0)),
           ("prctl_subreaper", 157, (36, 1)), ("prctl_mm", 157, (35, 0, 0)),
           ("mremap", 25, (0, 4096, 8192, 0)), ("remap_file_pages", 216, (0, 4096, 0, 0, 0))]


def _in_child() -> dict:
    """Apply the filter in a forked child and report what each call did."""

    def work(out: dict) -> None:
        seccomp_allow.apply_allow_list(own_pid=os.getpid())
        for name, nr, args in REFUSED:
            out[name] = syscall(nr, *[os.getpid() if a == "self" else a for a in args])
        import threading

        done = []
        t = threading.Thread(target=lambda: done.append(1))
        t.start()
        t.join()
        out["thread"] = bool(done)
        os.kill(os.getpid(), 0)
        out["own_signal"] = True
        name = ctypes.create_string_buffer(16)
        out["prctl_get_name"] = ctypes.CDLL(None).prctl(16, name, 0, 0, 0) == 0  # PR_GET_NAME: other options work
        import socket

        a, b = socket.socketpair()
        out["unix_socket"] = a.send(b"x") == 1
        import torch

        out["torch"] = float(torch.ones(4).sum()) == 4.0

    return in_forked_child(work, {})


def test_calls_outside_the_list_are_refused_and_what_a_candidate_needs_works():
    got = _in_child()
    assert "error" not in got, got
    for name, _, _ in REFUSED:
        assert got[name] in ("EPERM", "ENOSYS"), (name, got[name])
    assert got["thread"] and got["own_signal"] and got["unix_socket"] and got["torch"] and got["prctl_get_name"], got


def test_the_allow_list_is_dockers_default_narrowed():
    """Nothing the candidate must not do is on the list, and the list is Docker's (no capability) one."""
    for name in seccomp_allow.REMOVED_FROM_DOCKER:
        assert name not in seccomp_allow.ALLOWED, name
    for needed in ("ioctl", "mmap", "futex", "sched_setaffinity", "memfd_create", "socketpair", "sendmsg"):
        assert needed in seccomp_allow.ALLOWED
