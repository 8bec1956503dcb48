"""The candidate's seccomp filter as an allow-list, assembled by libseccomp.

Trusted side (applied in the candidate's ``prepare``, before any solution code). libseccomp (the
library Docker, systemd and podman use) turns names into numbers for this architecture, handles
the x32 ABI and multiplexed calls, and writes the BPF; kag only lists what a candidate needs. Every
syscall not listed fails with EPERM (``clone3`` with ENOSYS, so libc falls back to ``clone``, whose
flags a filter can read).

The list is Docker's default profile for a container without capabilities (moby
``profiles/seccomp/default.json``: the calls it allows unconditionally and those it gates on an
architecture), narrowed where a candidate needs less than a container:

- ``socket`` only for local, IP and netlink families (Docker refuses AF_VSOCK alone);
- no process creation or exec (``fork``, ``vfork``, ``execve``, ``execveat``; ``clone`` only with
  ``CLONE_THREAD``: threads, not processes);
- signals only to itself (``kill``/``tgkill`` with its own pid, 0 or its group; no ``tkill``,
  ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo``, ``pidfd_*``);
- ``prctl`` without ``PR_SET_PDEATHSIG`` (a candidate that cleared it outlived a killed
  orchestrator, GPU and all), ``PR_SET_CHILD_SUBREAPER`` or ``PR_SET_MM``;
- no ``ptrace``, ``process_vm_*`` (Docker allows them from kernel 4.8), no ``io_uring_*``;
- no ``mremap`` or ``remap_file_pages``: growing what is left of a library's file mapping over the
  pages the fatbin wall replaced would read PyTorch's GPU code back from the page cache, no open
  needed (tests/core/trust/test_fatbin_wall.py does it without the filter);
- ``get_mempolicy``/``mbind``/``set_mempolicy`` added (Docker gates them on CAP_SYS_NICE; they act
  on the caller's own memory, and NUMA-aware allocators call them);
- no state another process can see through a file both may read (the candidate's filter only: agent
  commands keep them): file locks (``flock``, ``fcntl``'s record, open-file-description locks and
  leases) succeed without locking, directory notices (``F_NOTIFY``) likewise, page-cache advice
  (``fadvise64``, ``readahead`` and madvise's ``MADVISE_FAKED``: evicting and loading a file's pages on
  demand) likewise, and ``inotify_*`` is refused. Two candidates at once had a channel through them (one locks, opens or
  evicts a file of torch's, the other sees it); a candidate cannot fork, so a lock of its own is never
  needed against another process, and every other ``fcntl`` command is allowed by value. Left: a futex
  without FUTEX_PRIVATE_FLAG on a page of a file both map is keyed on the file (one candidate wakes
  another: 16/16 bits). It cannot be refused: glibc's pthread_join waits on the thread's id that way,
  since the kernel's wake when a thread exits is shared, and that wake (``set_tid_address``, the robust
  list) is the kernel's own, with no call to filter (bench/results/2026-11-29-d7aecb5-cpu);
- no change to a file's metadata (``chmod``, ``chown``, the ``utime`` calls, the ``xattr`` setters,
  ``fcntl``'s write-life hints): the candidate is uid 0 without capabilities, which still owns the
  host's files, and Landlock covers none of these. An independent attack set a setuid bit on a host
  file it could only read, made the evaluations' folder listable again, and passed 62 bits a file to a
  concurrent candidate in its times. Nor the file systems' inode ioctls (``IOCTL_TYPES_REFUSED``: a
  file's flags, its generation, its fsxattr, ext4's extent cache), refused by the command's type in a
  few dozen aligned blocks; every other ioctl (CUDA's, terminals', sockets') is allowed. Left: mincore
  and read timing still tell a cached page from another.

``ALLOWED`` and ``CONDITIONAL`` are the whole policy; ``kag doctor`` says which filter is active.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
from typing import Any

# Docker's default allow-list (no capabilities), less what a candidate must not do.
ALLOWED = (
    "accept", "accept4", "access", "adjtimex", "alarm", "bind", "brk", "capget", "capset", "chdir", "chmod",
    "chown", "clock_adjtime", "clock_getres", "clock_gettime", "clock_nanosleep", "close", "close_range", "connect",
    "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old",
    "epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "exit", "exit_group",
    "faccessat", "faccessat2", "fadvise64", "fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchown",
    "fchownat", "fcntl", "fdatasync", "fgetxattr", "flistxattr", "flock", "fremovexattr", "fsetxattr", "fstat",
    "fstatfs", "fsync", "ftruncate", "futex", "futex_waitv", "futimesat", "getcpu", "getcwd", "getdents",
    "getdents64", "getegid", "geteuid", "getgid", "getgroups", "getitimer", "getpeername", "getpgid", "getpgrp",
    "getpid", "getppid", "getpriority", "getrandom", "getresgid", "getresuid", "getrlimit", "get_robust_list",
    "getrusage", "getsid", "getsockname", "getsockopt", "get_thread_area", "gettid", "gettimeofday", "getuid",
    "getxattr", "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel", "ioctl",
    "io_destroy", "io_getevents", "io_pgetevents", "ioprio_get", "ioprio_set", "io_setup", "io_submit", "ipc",
    "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat",
    "listen", "listxattr", "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise", "membarrier",
    "memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall",
    "mmap", "mprotect", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink",
    "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap", "name_to_handle_at",
    "nanosleep", "newfstatat", "open", "openat", "openat2", "pause", "pipe", "pipe2", "pkey_alloc", "pkey_free",
    "pkey_mprotect", "poll", "ppoll", "pread64", "preadv", "preadv2", "prlimit64", "pselect6", "pwrite64",
    "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg",
    "removexattr", "rename", "renameat", "renameat2", "restart_syscall", "rmdir", "rseq",
    "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
    "sched_getaffinity", "sched_getattr", "sched_getparam", "sched_get_priority_max", "sched_get_priority_min",
    "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity", "sched_setattr", "sched_setparam",
    "sched_setscheduler", "sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop", "sendfile",
    "sendmmsg", "sendmsg", "sendto", "setfsgid", "setfsuid", "setgid", "setgroups", "setitimer", "setpgid",
    "setpriority", "setregid", "setresgid", "setresuid", "setreuid", "setrlimit", "set_robust_list", "setsid",
    "setsockopt", "set_thread_area", "set_tid_address", "setuid", "setxattr", "shmat", "shmctl", "shmdt", "shmget",
    "shutdown", "sigaltstack", "signalfd", "signalfd4", "socketpair", "splice", "stat", "statfs", "statx", "symlink",
    "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "time", "timer_create", "timer_delete",
    "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create", "timerfd_gettime", "timerfd_settime",
    "times", "truncate", "umask", "uname", "unlink", "unlinkat", "utime", "utimensat", "utimes", "vmsplice", "wait4",
    "waitid", "write", "writev",
    # architecture-gated in Docker's profile
    "arch_prctl", "modify_ldt",
    # gated on CAP_SYS_NICE there; they act on the caller's own memory (NUMA-aware allocators)
    "get_mempolicy", "mbind", "set_mempolicy",
)
# what Docker allows and a candidate may not (documented: the tests refuse each from C++)
REMOVED_FROM_DOCKER = ("execve", "execveat", "fork", "vfork", "io_uring_enter", "io_uring_register", "io_uring_setup",
                       "pidfd_open", "pidfd_send_signal", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "tkill",
                       "process_mrelease", "ptrace", "process_vm_readv", "process_vm_writev",
                       # growing a file mapping reads a walled library's GPU code back from the page cache
                       # (kag.core.trust.fatbin_wall); glibc's realloc copies instead when mremap fails
                       "mremap", "remap_file_pages")
# the candidate's filter (no_fork): what another process could see through a file both can read
UNSHARED_STATE = ("flock", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "fadvise64",
                  "readahead")
FAKED = ("flock", "fadvise64", "readahead")  # succeed, doing nothing
METADATA = ("chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime", "utimes", "utimensat",
            "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr")
FCNTL_LOCKS = (6, 7, 13, 14, 37, 38, 1024, 1026)  # F_SETLK(W), F_SETLK64(W), F_OFD_SETLK(W), F_SETLEASE, F_NOTIFY
FCNTL_REFUSED = (1036, 1038)  # F_SET_RW_HINT, F_SET_FILE_RW_HINT: the owner's, read-only descriptor or not
# the Linux-specific commands Linux 6.18 knows (up to F_SET_FILE_RW_HINT): a later one (6.19's delegations) is
# refused until it is read, not allowed because its number is free today (an independent attack's note)
FCNTL_OTHERS = tuple(c for c in (*range(64), *range(1024, 1039)) if c not in FCNTL_LOCKS + FCNTL_REFUSED)
CLONE_THREAD = 0x00010000
# ioctl "types" (bits 8-15 of the command) of the file systems' inode ioctls, refused to a candidate with
# ENOTTY (what a file system without them answers): 'X' (FS_IOC_FS[GS]ETXATTR, FITRIM, FIFREEZE), 'f'
# (FS_IOC_[GS]ETFLAGS, FIEMAP and ext4's own: clearing and reading its extent cache passed bits between
# candidates without a write), 'v' (FS_IOC_[GS]ETVERSION), 0x94 (btrfs, FICLONE, FIDEDUPERANGE, labels). The
# read-only mounts (kag.core.trust.private_mounts) refuse the setters by path, not on a file whose mount is
# the host's: the interpreter by /proc/self/exe (an independent attack set its generation and flags).
# NVIDIA's driver uses 'F' (0x46) and UVM type 0; terminals 'T' (0x54), sockets 0x89.
IOCTL_TYPES_REFUSED = (0x58, 0x66, 0x76, 0x94)


# madvise advice that loads or evicts a file's pages in the page cache every process shares (WILLNEED, COLD,
# PAGEOUT, POPULATE_READ): faked like fadvise64 and readahead. uid 0 owns the host's files, so PAGEOUT evicted
# pages of a file on the read-only mount: an independent attack sent 16/16 bits to a later candidate that way.
MADVISE_FAKED = (3, 20, 21, 22)


def aligned_blocks(refused: tuple[int, ...], span: int) -> list[tuple[int, int]]:
    """``(start, size)`` blocks, each aligned to its power-of-two size, that together cover ``range(span)``
    but ``refused``: a filter tests a few dozen masked values instead of every allowed one."""
    out: list[tuple[int, int]] = []

    def cover(start: int, size: int) -> None:
        if not any(start <= t < start + size for t in refused):
            out.append((start, size))
        elif size > 1:
            cover(start, size // 2)
            cover(start + size // 2, size // 2)

    cover(0, span)
    return out


def ioctl_type_blocks(refused: tuple[int, ...] = IOCTL_TYPES_REFUSED) -> list[tuple[int, int]]:
    """``(mask, value)`` pairs on an ioctl command that together match every type but ``refused``."""
    return [((0xFF & ~(size - 1)) << 8, start << 8) for start, size in aligned_blocks(refused, 256)]


def madvise_blocks(faked: tuple[int, ...] = MADVISE_FAKED) -> list[tuple[int, int]]:
    """``(mask, value)`` pairs on madvise's advice that match every value under 128 but ``faked``."""
    return [(LOW32 & ~(size - 1), start) for start, size in aligned_blocks(faked, 128)]


SOCKET_FAMILIES = (1, 2, 10, 16)  # AF_UNIX (torch passes descriptors), AF_INET/INET6 (a network namespace of
# its own), AF_NETLINK (interface queries); never AF_VSOCK, which no network namespace confines
LOW32 = 0xFFFFFFFF  # int arguments are compared on their low 32 bits (the upper half of the register is not theirs)
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)  # Docker's: the default and READ_IMPLIES_EXEC variants
# prctl options a candidate may not use: outliving its judge (PR_SET_PDEATHSIG: a candidate that
# cleared it kept running with the GPU after its orchestrator was killed), adopting orphans
# (PR_SET_CHILD_SUBREAPER) and rewriting its own memory map's bookkeeping (PR_SET_MM)
PRCTL_REFUSED = (1, 35, 36)
PRCTL_OPTIONS = tuple(o for o in range(128) if o not in PRCTL_REFUSED) + (0x59616D61,)  # + Yama's PR_SET_PTRACER

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7
SCMP_FLTATR_CTL_NNP, SCMP_FLTATR_CTL_TSYNC = 3, 4
NR_SCMP_ERROR = -1


def scmp_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class ScmpArgCmp(ctypes.Structure):
    """libseccomp's ``struct scmp_arg_cmp``: for MASKED_EQ, ``datum_a`` is the mask, ``datum_b`` the value."""

    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


_LIB: Any = None


def library() -> Any:
    """libseccomp through ctypes, or None when it is not installed."""
    global _LIB
    if _LIB is None:
        for name in ("libseccomp.so.2", ctypes.util.find_library("seccomp") or ""):
            if not name:
                continue
            try:
                lib = ctypes.CDLL(name, use_errno=True)
            except OSError:
                continue
            lib.seccomp_init.restype = ctypes.c_void_p
            lib.seccomp_init.argtypes = [ctypes.c_uint32]
            lib.seccomp_release.argtypes = [ctypes.c_void_p]
            lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
            lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
            lib.seccomp_rule_add_array.restype = ctypes.c_int
            lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                                   ctypes.POINTER(ScmpArgCmp)]
            lib.seccomp_attr_set.restype = ctypes.c_int
            lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
            lib.seccomp_load.restype = ctypes.c_int
            lib.seccomp_load.argtypes = [ctypes.c_void_p]
            _LIB = lib
            break
        else:
            _LIB = False
    return _LIB or None


def available() -> bool:
    return library() is not None


def _rule(lib: Any, ctx: Any, action: int, name: str, *cmps: tuple[int, int, int, int]) -> bool:
    nr = lib.seccomp_syscall_resolve_name(name.encode())
    if nr == NR_SCMP_ERROR:
        return False  # not a syscall of this architecture (or newer than this libseccomp)
    arr = (ScmpArgCmp * max(1, len(cmps)))(*[ScmpArgCmp(*c) for c in cmps])
    rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
    if rc < 0:
        raise OSError(-rc, f"seccomp rule for {name}: {errno.errorcode.get(-rc, rc)}")
    return True


def apply_allow_list(no_exec: bool = True, no_fork: bool = True, own_pid: int | None = None) -> int:
    """Load the allow-list filter on every thread of this process (TSYNC). ``no_exec``/``no_fork``
    False put exec and fork back (agent commands). Returns how many rules were added; raises
    OSError when libseccomp refuses, RuntimeError when it is missing."""
    lib = library()
    if lib is None:
        raise RuntimeError("libseccomp is not installed")
    ctx = lib.seccomp_init(scmp_errno(errno.EPERM))
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")
    try:
        for attr in (SCMP_FLTATR_CTL_TSYNC, SCMP_FLTATR_CTL_NNP):
            lib.seccomp_attr_set(ctx, attr, 1)
        count = 0
        extra = (() if no_exec else ("execve", "execveat")) + (() if no_fork else ("fork", "vfork"))
        for name in ALLOWED + extra:
            if no_fork and name in UNSHARED_STATE + METADATA + ("fcntl", "ioctl", "madvise"):
                continue
            count += _rule(lib, ctx, SCMP_ACT_ALLOW, name)
        if no_fork:  # locks that lock nothing, notices that never come; inotify, metadata refused (the default)
            for name in FAKED:
                count += _rule(lib, ctx, scmp_errno(0), name)
            for cmd in FCNTL_LOCKS:
                count += _rule(lib, ctx, scmp_errno(0), "fcntl", (1, SCMP_CMP_MASKED_EQ, LOW32, cmd))
            for cmd in FCNTL_OTHERS:
                count += _rule(lib, ctx, SCMP_ACT_ALLOW, "fcntl", (1, SCMP_CMP_MASKED_EQ, LOW32, cmd))
            for mask, value in ioctl_type_blocks():  # libseccomp lets an unconditional allow win: by blocks
                count += _rule(lib, ctx, SCMP_ACT_ALLOW, "ioctl", (1, SCMP_CMP_MASKED_EQ, mask, value))
            for kind in IOCTL_TYPES_REFUSED:
                count += _rule(lib, ctx, scmp_errno(errno.ENOTTY), "ioctl", (1, SCMP_CMP_MASKED_EQ, 0xFF00, kind << 8))
            for mask, value in madvise_blocks():
                count += _rule(lib, ctx, SCMP_ACT_ALLOW, "madvise", (2, SCMP_CMP_MASKED_EQ, mask, value))
            for advice in MADVISE_FAKED:
                count += _rule(lib, ctx, scmp_errno(0), "madvise", (2, SCMP_CMP_MASKED_EQ, LOW32, advice))
        for family in SOCKET_FAMILIES:
            count += _rule(lib, ctx, SCMP_ACT_ALLOW, "socket", (0, SCMP_CMP_MASKED_EQ, LOW32, family))
        for value in PERSONALITIES:
            count += _rule(lib, ctx, SCMP_ACT_ALLOW, "personality", (0, SCMP_CMP_MASKED_EQ, LOW32, value))
        for value in PRCTL_OPTIONS:  # libseccomp cannot refuse a few values under an unconditional allow
            count += _rule(lib, ctx, SCMP_ACT_ALLOW, "prctl", (0, SCMP_CMP_MASKED_EQ, LOW32, value))
        count += _rule(lib, ctx, scmp_errno(errno.ENOSYS), "clone3")
        if no_fork:  # threads only
            count += _rule(lib, ctx, SCMP_ACT_ALLOW, "clone", (0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD))
        else:
            count += _rule(lib, ctx, SCMP_ACT_ALLOW, "clone")
        if own_pid is None:
            count += _rule(lib, ctx, SCMP_ACT_ALLOW, "kill") + _rule(lib, ctx, SCMP_ACT_ALLOW, "tgkill")
        else:  # only towards itself: its pid, its group (0, -pid)
            for value in sorted({0, own_pid & LOW32, (-own_pid) & LOW32}):
                count += _rule(lib, ctx, SCMP_ACT_ALLOW, "kill", (0, SCMP_CMP_MASKED_EQ, LOW32, value))
            count += _rule(lib, ctx, SCMP_ACT_ALLOW, "tgkill", (0, SCMP_CMP_MASKED_EQ, LOW32, own_pid & LOW32))
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise OSError(-rc, f"seccomp_load: {errno.errorcode.get(-rc, rc)}")
        return count
    finally:
        lib.seccomp_release(ctx)
