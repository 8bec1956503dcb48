"""Least privilege for untrusted processes: no_new_privs, capabilities, another uid, Landlock, seccomp.

Trusted side. The judge applies ``confine`` in the candidate right after forking it (one thread,
before any solution code exists); the local sandbox applies it to every agent command. Each layer
is the kernel's, not a check of ours, so it holds whatever the confined code does:

- ``PR_SET_NO_NEW_PRIVS``: nothing it executes can gain privileges;
- a separate uid (when we are root and the caller asks) or, staying uid 0, every capability
  dropped (no CAP_SYS_PTRACE, CAP_DAC_OVERRIDE, CAP_KILL...);
- Landlock (Linux 5.13+): files readable only under an allow-list, writable only under another,
  and (ABI 6+) no signals to processes outside the sandbox;
- seccomp: ptrace, process_vm_readv/writev, process creation and exec, namespaces, bpf, io_uring,
  keyrings and signals to other processes are refused with EPERM.

``kag.core.trust.layers.confinement_support()`` says which layers this machine has (``kag doctor``
prints it); a layer the kernel lacks is reported, never faked.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
from typing import Any, Iterable

import attrs

PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
PR_SET_CHILD_SUBREAPER = 36
CAP_LAST_CAP_FALLBACK = 40

# Landlock (include/uapi/linux/landlock.h)
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
LL_REMOVE_DIR, LL_REMOVE_FILE, LL_MAKE_CHAR, LL_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
LL_MAKE_REG, LL_MAKE_SOCK, LL_MAKE_FIFO, LL_MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
LL_MAKE_SYM, LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1 << 0, 1 << 1
LL_SCOPE_ABSTRACT_UNIX, LL_SCOPE_SIGNAL = 1 << 0, 1 << 1
LL_RULE_PATH_BENEATH = 1
LL_CREATE_RULESET_VERSION = 1
READ_ACCESS = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
FILE_ONLY_ACCESS = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV

# seccomp
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
CLONE_THREAD = 0x00010000

# Syscall numbers per architecture: (landlock create, add, restrict) are 444-446 on both.
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "seccomp": 317, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "execve": 59,
        "execveat": 322, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "kill": 62, "tkill": 200,
        "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424,
        "pidfd_open": 434, "pidfd_getfd": 438, "unshare": 272, "setns": 308, "bpf": 321, "keyctl": 250,
        "add_key": 248, "request_key": 249, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "userfaultfd": 323, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "kexec_load": 246, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "capset": 126, "prctl": 157, "mremap": 25, "remap_file_pages": 216,
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "chown": 92, "fchown": 93, "lchown": 94,
        "fchownat": 260, "utime": 132, "utimes": 235, "utimensat": 280, "futimesat": 261, "setxattr": 188,
        "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199,
        "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254, "ioctl": 16,
        "setxattrat": 463, "removexattrat": 466, "file_setattr": 469, "fcntl": 72, "fanotify_init": 300,
    },
    "aarch64": {
        "seccomp": 277, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "execve": 221,
        "execveat": 281, "clone": 220, "clone3": 435, "kill": 129, "tkill": 130, "tgkill": 131,
        "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "pidfd_send_signal": 424, "pidfd_open": 434,
        "pidfd_getfd": 438, "unshare": 97, "setns": 268, "bpf": 280, "keyctl": 219, "add_key": 217,
        "request_key": 218, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "userfaultfd": 282, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "kexec_load": 104,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "capset": 91, "prctl": 167,
        "mremap": 216, "remap_file_pages": 234,
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "fchown": 55, "fchownat": 54, "utimensat": 88,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16,
        "inotify_init1": 26, "inotify_add_watch": 27, "ioctl": 29,
        "setxattrat": 463, "removexattrat": 466, "file_setattr": 469,  # numbers from 424 on are one table
        "fcntl": 25, "fanotify_init": 262,
    },
}
# Refused outright: reading or writing other processes, leaving the sandbox, kernel attack surface.
ALWAYS_DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_getfd",
                 "pidfd_send_signal", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "tkill", "unshare", "setns", "bpf",
                 "keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register",
                 "userfaultfd", "mount", "umount2", "pivot_root", "chroot", "kexec_load", "init_module",
                 "finit_module", "delete_module")
NO_EXEC = ("execve", "execveat")
# a candidate (no exec): growing a file mapping would read a walled library's GPU code back from the
# page cache (kag.core.trust.fatbin_wall); glibc's realloc falls back to copying when mremap fails
NO_REMAP = ("mremap", "remap_file_pages")
NO_FORK = ("fork", "vfork")
# a candidate (no fork): it runs as uid 0 without capabilities, which still owns the host's files, and
# Landlock does not cover metadata: a mode (a setuid bit on a host binary), an owner, times or an
# extended attribute (an ACL) changed on a file it may only read (kag.core.trust.seccomp_allow, whose
# allow-list also makes file locks and page-cache advice do nothing: this deny-list keeps them real)
NO_METADATA = ("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
               "utimes", "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
               "lremovexattr", "fremovexattr", "inotify_init", "inotify_init1", "inotify_add_watch",
               # Linux 6.13's xattr calls by path and 6.17's fsxattr by path: through /proc/self/fd or
               # /proc/self/exe they reach a file on the host's writable mount (the allow-list has none)
               "setxattrat", "removexattrat", "file_setattr",
               # file watches of another kind than inotify: a receiver marks files, a sender opens them
               "fanotify_init")


class ConfinementError(Exception):
    """A layer that was asked for could not be applied (the process must not go on)."""


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(nr: int, *args: Any) -> int:
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    res = libc.syscall(ctypes.c_long(nr), *args)
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(res)


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    libc = _libc()
    res = libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0),
                     ctypes.c_ulong(0))
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(res)


def arch() -> str:
    return platform.machine()


# ---------------------------------------------------------------------------------------------
# simple layers
def set_no_new_privs() -> None:
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def no_new_privs() -> bool:
    try:
        return _prctl(PR_GET_NO_NEW_PRIVS) == 1
    except OSError:
        return False


def set_dumpable(flag: bool) -> None:
    """``False``: /proc/<pid>/mem, environ and fd/ become root's and ptrace needs CAP_SYS_PTRACE."""
    _prctl(PR_SET_DUMPABLE, 1 if flag else 0)


def set_child_subreaper() -> None:
    """Orphans of our descendants (a double fork with setsid) are re-parented to us, not to init,
    so ``descendants`` still finds them and the evaluation can kill them."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return CAP_LAST_CAP_FALLBACK


def drop_capabilities() -> None:
    """Empty the bounding set and the effective, permitted and inheritable sets (uid 0 keeps its
    uid but loses what makes it powerful: ptrace, DAC override, kill, mount...)."""
    for cap in range(_last_cap() + 1):
        try:
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EPERM):
                raise
    header = struct.pack("=Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = ctypes.create_string_buffer(b"\0" * 24)  # two __user_cap_data_struct, all zero
    hdr = ctypes.create_string_buffer(header)
    _syscall(SYSCALLS[arch()]["capset"], hdr, data)


def effective_capabilities() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return -1


def change_uid(uid: int, gid: int | None = None) -> None:
    """Become ``uid`` (and ``gid``, default the same number) for good: real, effective and saved."""
    gid = uid if gid is None else gid
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


# ---------------------------------------------------------------------------------------------
# Landlock
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing or disabled."""
    if sys.platform != "linux":
        return 0
    try:
        return _syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(LL_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM (ABI 1)
    if abi >= 2:
        rights |= LL_REFER
    if abi >= 3:
        rights |= LL_TRUNCATE
    if abi >= 5:
        rights |= LL_IOCTL_DEV
    return rights


@attrs.frozen
class LandlockPolicy:
    """Paths readable (and executable), paths writable (files created, removed, truncated there),
    device files usable (read, write, ioctl: /dev/nvidia*, /dev/null), and whether signals and
    abstract Unix sockets may reach outside the sandbox (ABI 6+ scopes them)."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    scope_signals: bool = True
    block_tcp: bool = True
    exclude: tuple[str, ...] = ()  # files under ``read`` that stay unreadable (kag.core.trust.fatbin_wall)
    listings: dict[str, list[str]] = attrs.field(factory=dict)  # folders listed before an earlier layer hid them


def apply_landlock(policy: LandlockPolicy) -> int:
    """Restrict this thread and its future children (call it while single-threaded). Returns the
    ABI used; raises ConfinementError when Landlock is missing."""
    abi = landlock_abi()
    if abi < 1:
        raise ConfinementError("Landlock is not available in this kernel")
    handled_fs = _fs_rights(abi)
    handled_net = (LL_NET_BIND_TCP | LL_NET_CONNECT_TCP) if abi >= 4 and policy.block_tcp else 0
    scoped = (LL_SCOPE_SIGNAL | LL_SCOPE_ABSTRACT_UNIX) if abi >= 6 and policy.scope_signals else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", handled_fs, handled_net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled_fs, handled_net)
    else:
        attr = struct.pack("=Q", handled_fs)
    buf = ctypes.create_string_buffer(attr)
    ruleset = _syscall(444, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        write_rights = handled_fs
        dev_rights = (LL_READ_FILE | LL_WRITE_FILE | (LL_IOCTL_DEV if abi >= 5 else 0)
                      | (LL_TRUNCATE if abi >= 3 else 0))
        read = readable_except(policy.read, policy.exclude, policy.listings) if policy.exclude else policy.read
        for paths, rights in ((read, READ_ACCESS), (policy.write, write_rights | READ_ACCESS),
                              (policy.devices, dev_rights)):
            for path in _existing(paths):
                _add_path_rule(ruleset, path, rights & handled_fs)
        set_no_new_privs()
        _syscall(446, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return abi


def readable_except(paths: Iterable[str], excluded: Iterable[str],
                    listings: dict[str, list[str]] | None = None) -> tuple[str, ...]:
    """Rules that grant everything under ``paths`` but the ``excluded`` files. Landlock grants a
    directory's whole tree (by inode, whatever path reaches it), so a granted directory that holds
    an excluded file is replaced by its entries, recursively, down to the file's siblings; entries
    are compared by real path, so a symbolic link to an excluded file is left out too. ``listings``
    (``holder_listings``, taken before an earlier layer) stand in for folders that layer made unlistable."""
    banned = {os.path.realpath(p) for p in excluded}
    holders = _holders(banned)
    out: list[str] = []

    def grant(path: str) -> None:
        real = os.path.realpath(path)
        if real in banned:
            return
        if real not in holders:
            out.append(real)
            return
        try:
            entries = sorted(listings[real]) if listings and real in listings else sorted(os.listdir(real))
        except OSError:
            return
        for name in entries:
            grant(os.path.join(real, name))

    for path in _existing(paths):
        grant(path)
    return tuple(dict.fromkeys(out))


def _holders(files: Iterable[str]) -> set[str]:
    """Every folder above each of ``files``."""
    holders: set[str] = set()
    for path in files:
        parent = os.path.dirname(path)
        while parent and parent not in holders:
            holders.add(parent)
            if parent == "/":
                break
            parent = os.path.dirname(parent)
    return holders


def holder_listings(files: Iterable[str]) -> dict[str, list[str]]:
    """The entries of every folder above ``files`` (real paths), listed now: a later Landlock layer
    that hides some of them must list those folders, which the first layer may have made unlistable."""
    out: dict[str, list[str]] = {}
    for folder in _holders({os.path.realpath(p) for p in files}):
        try:
            out[folder] = os.listdir(folder)
        except OSError:
            pass
    return out


def _existing(paths: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for path in paths:
        if path and os.path.exists(path) and path not in seen:
            seen.append(path)
    return seen


def _add_path_rule(ruleset: int, path: str, rights: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            rights &= FILE_ONLY_ACCESS  # directory rights on a file are EINVAL
        attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))  # packed: 12 bytes
        _syscall(445, ctypes.c_int(ruleset), ctypes.c_int(LL_RULE_PATH_BENEATH), attr, ctypes.c_uint32(0))
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# seccomp
def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


BPF_LD_W_ABS, BPF_JEQ_K, BPF_JSET_K, BPF_RET_K, BPF_AND_K = 0x20, 0x15, 0x45, 0x06, 0x54
OFF_NR, OFF_ARCH, OFF_ARG0_LO, OFF_ARG1_LO = 0, 4, 16, 24


def seccomp_program(no_exec: bool = True, no_fork: bool = True, own_pid: int | None = None) -> bytes:
    """A filter that returns EPERM for the denied syscalls (ENOSYS for clone3, so libc falls back to
    clone, whose flags a filter can read), lets threads be created, and allows kill/tgkill only
    towards this process (``own_pid``, as this process sees itself) and its own group."""
    machine = arch()
    if machine not in SYSCALLS:
        raise ConfinementError(f"seccomp filter: unsupported architecture {machine}")
    nrs = SYSCALLS[machine]
    denied = [nrs[n] for n in ALWAYS_DENIED + (NO_EXEC + NO_REMAP if no_exec else ()) + (NO_FORK + NO_METADATA if no_fork else ())
              if n in nrs]
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    prog: list[bytes] = [_bpf(BPF_LD_W_ABS, OFF_ARCH), _bpf(BPF_JEQ_K, AUDIT_ARCH[machine], 1, 0),
                         _bpf(BPF_RET_K, eperm), _bpf(BPF_LD_W_ABS, OFF_NR)]
    if machine == "x86_64":  # the x32 ABI (nr | 0x40000000) would bypass the numbers below
        prog += [_bpf(0x35, 0x40000000, 0, 1), _bpf(BPF_RET_K, eperm)]  # JGE
    for nr in denied:
        prog += [_bpf(BPF_JEQ_K, nr, 0, 1), _bpf(BPF_RET_K, eperm)]
    prog += [_bpf(BPF_JEQ_K, nrs["clone3"], 0, 1), _bpf(BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS)]
    if no_fork:  # clone: threads only
        prog += [_bpf(BPF_JEQ_K, nrs["clone"], 0, 4), _bpf(BPF_LD_W_ABS, OFF_ARG0_LO),
                 _bpf(BPF_JSET_K, CLONE_THREAD, 1, 0), _bpf(BPF_RET_K, eperm), _bpf(BPF_RET_K, SECCOMP_RET_ALLOW)]
    if no_exec:  # a candidate: prctl without PR_SET_PDEATHSIG, PR_SET_MM, PR_SET_CHILD_SUBREAPER
        refused = (1, 35, 36)
        checks = [_bpf(BPF_JEQ_K, value, len(refused) - i, 0) for i, value in enumerate(refused)]
        prog += [_bpf(BPF_JEQ_K, nrs["prctl"], 0, 3 + len(checks)), _bpf(BPF_LD_W_ABS, OFF_ARG0_LO), *checks,
                 _bpf(BPF_RET_K, SECCOMP_RET_ALLOW), _bpf(BPF_RET_K, eperm)]
    if no_fork:  # a candidate: no file system's inode ioctls (kag.core.trust.seccomp_allow.IOCTL_TYPES_REFUSED)
        from kag.core.trust.seccomp_allow import IOCTL_TYPES_REFUSED as types

        checks = [_bpf(BPF_JEQ_K, kind << 8, len(types) - i, 0) for i, kind in enumerate(types)]
        prog += [_bpf(BPF_JEQ_K, nrs["ioctl"], 0, 4 + len(checks)), _bpf(BPF_LD_W_ABS, OFF_ARG1_LO),
                 _bpf(BPF_AND_K, 0xFF00), *checks, _bpf(BPF_RET_K, SECCOMP_RET_ALLOW),
                 _bpf(BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOTTY)]
        # fcntl's write-life hints: the owner's on a read-only descriptor, kept on the inode for a later candidate
        from kag.core.trust.seccomp_allow import FCNTL_REFUSED as hints

        checks = [_bpf(BPF_JEQ_K, cmd, len(hints) - i, 0) for i, cmd in enumerate(hints)]
        prog += [_bpf(BPF_JEQ_K, nrs["fcntl"], 0, 3 + len(checks)), _bpf(BPF_LD_W_ABS, OFF_ARG1_LO), *checks,
                 _bpf(BPF_RET_K, SECCOMP_RET_ALLOW), _bpf(BPF_RET_K, eperm)]
    if own_pid is not None:  # kill(pid) and tgkill(tgid): only ourselves and our own group
        allowed = sorted({0, own_pid & 0xFFFFFFFF, (-own_pid) & 0xFFFFFFFF})
        for name in ("kill", "tgkill"):
            checks = [_bpf(BPF_JEQ_K, value, len(allowed) - i, 0) for i, value in enumerate(allowed)]
            prog += [_bpf(BPF_JEQ_K, nrs[name], 0, 3 + len(checks)), _bpf(BPF_LD_W_ABS, OFF_ARG0_LO), *checks,
                     _bpf(BPF_RET_K, eperm), _bpf(BPF_RET_K, SECCOMP_RET_ALLOW)]
    prog.append(_bpf(BPF_RET_K, SECCOMP_RET_ALLOW))
    if len(prog) > 4096:
        raise ConfinementError("seccomp filter too long")
    return b"".join(prog)


def apply_seccomp(no_exec: bool = True, no_fork: bool = True, own_pid: int | None = None,
                  allow_list: bool = True) -> str:
    """Install a filter on every thread of this process (TSYNC): libseccomp's allow-list
    (kag.core.trust.seccomp_allow) where libseccomp is installed, else the deny-list assembled
    here. Returns which one, as ``kag doctor`` and a result's ``confinement`` name it."""
    if allow_list:
        from kag.core.trust import seccomp_allow  # imported before Landlock by the candidate (prepare)

        if seccomp_allow.available():
            seccomp_allow.apply_allow_list(no_exec, no_fork, own_pid)
            return "seccomp (allow-list, libseccomp)"
    program = seccomp_program(no_exec, no_fork, own_pid)
    filters = ctypes.create_string_buffer(program)
    fprog = ctypes.create_string_buffer(struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(filters)))
    set_no_new_privs()
    _syscall(SYSCALLS[arch()]["seccomp"], ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
             ctypes.c_uint(SECCOMP_FILTER_FLAG_TSYNC), fprog)
    return f"seccomp (deny-list{': libseccomp is not installed' if allow_list else ''})"


def seccomp_mode() -> int:
    """0 none, 2 filter (from /proc/self/status); -1 when the kernel does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Seccomp:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1


# ---------------------------------------------------------------------------------------------
# what a confined Python process needs to read
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "passwd", "group", "hosts",
             "host.conf", "os-release", "alternatives", "nvidia", "gai.conf", "mime.types", "ssl/certs", "timezone")
PROC_FILES = ("cpuinfo", "meminfo", "stat", "sys", "driver", "filesystems", "version", "mounts", "uptime", "loadavg")
DEVICE_FILES = ("null", "zero", "urandom", "random", "full")


def system_read_paths(protected: Iterable[str] = ()) -> list[str]:
    """Paths a Python process with torch (and CUDA) reads: the system's libraries, this
    interpreter and its import path, CUDA, and a few files of /etc and /proc. Not /home, /root,
    caches or keys, and not /proc/<pid> of any other process. A path that holds one of
    ``protected`` (an import path entry that is the user's home, say) is left out."""
    paths = ["/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt", "/sys",
             "/usr/local/cuda", "/usr/local/nvidia", "/run/nvidia-persistenced",
             sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    paths += [p for p in sys.path if p and os.path.isabs(p)]
    for var in ("CUDA_HOME", "CUDA_PATH", "VIRTUAL_ENV"):
        if os.environ.get(var):
            paths.append(os.environ[var])
    paths += [f"/etc/{name}" for name in ETC_FILES] + [f"/proc/{name}" for name in PROC_FILES]
    guarded = [os.path.realpath(p) for p in protected]
    return [p for p in _existing(os.path.realpath(p) for p in paths)
            if not any(g == p or g.startswith(p.rstrip("/") + "/") for g in guarded)]


def device_paths(cuda: bool) -> list[str]:
    paths = [f"/dev/{name}" for name in DEVICE_FILES]
    if cuda and os.path.isdir("/dev"):
        paths += [os.path.join("/dev", d) for d in sorted(os.listdir("/dev")) if d.startswith("nvidia")]
    return _existing(paths)
