"""Fresh, empty /tmp, /run and /dev/shm for an agent's commands, with only their own folders in them.

Trusted side (kag.core.trust.confine_exec runs it first, in the mount namespace ``unshare -rnm``
gives the local sandbox's commands). A Unix socket with a path is reachable from any process that
can resolve the path: Landlock (to ABI 7) does not govern connect() on it and a network namespace
does not separate it. The host's sockets live in these folders: a Ray node's raylet and plasma
store (/tmp/ray: an agent that writes objects into plasma runs code in the trusted Ray worker that
unpickles them), Docker's (/run/docker.sock: root on the host), kag serve's, D-Bus. Over each
folder the commands get an empty tmpfs; the folders they must keep (their workspace, HOME, the
evaluation bridge, the Python and libraries they read) are bind-mounted back in at the same paths.
The tmpfs cannot be unmounted by the commands: Landlock and the seccomp filter refuse mount
operations after this. Abstract Unix sockets belong to the network namespace, already empty.

``read_only_except`` (the judge's candidate, in its own mount namespace): every mount read-only but
the few folders it writes. Landlock governs opening, writing and creating files, not an ioctl that
changes an inode a candidate merely reads (``FS_IOC_SETFLAGS``: no-atime and other flags,
``FS_IOC_SETVERSION``: a 32-bit generation, ``FS_IOC_FSSETXATTR``); the kernel refuses each on a
read-only mount, and any write a Landlock rule might let through. Not on a file whose mount is the
host's (the interpreter by /proc/self/exe, a descriptor from before the namespace): the candidate's
seccomp filter refuses those ioctls by type (kag.core.trust.seccomp_allow.IOCTL_TYPES_REFUSED).
Device nodes, FIFOs and sockets stay usable there: a read-only mount does not govern them.
"""

from __future__ import annotations

import ctypes
import os
from typing import Iterable

COVERED = ("/tmp", "/run", "/var/run", "/dev/shm")
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 0x2, 0x4, 0x1000, 0x4000
SYS_MOUNT_SETATTR = 442  # the same on x86_64 and aarch64 (the unified table); Linux 5.12+
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def covered_dirs(extra: Iterable[str] = (), folders: Iterable[str] | None = None) -> list[str]:
    """The folders to cover that are real folders here (/var/run is mostly a link to /run), and
    ``extra`` ones. ``folders`` replaces the default set: COVERED and Ray's temp folder when
    RAY_TMPDIR moves it out of /tmp."""
    wanted = list(COVERED if folders is None else folders) + [os.path.realpath(d) for d in extra if d]
    if folders is None and os.environ.get("RAY_TMPDIR"):
        wanted.append(os.path.realpath(os.environ["RAY_TMPDIR"]))
    out: list[str] = []
    for d in wanted:
        if os.path.isdir(d) and not os.path.islink(d) and d not in out:
            out.append(d)
    return out


def cover(keep: Iterable[str], extra: Iterable[str] = (), folders: Iterable[str] | None = None) -> list[str]:
    """Mount an empty tmpfs over each covered folder (``covered_dirs``), then bind every existing
    ``keep`` path that lies under one back in place. Returns the folders covered."""
    covered = covered_dirs(extra, folders)
    held: list[tuple[str, int, bool]] = []
    for path in sorted({os.path.realpath(p) for p in keep if p}):
        if not os.path.exists(path) or not any(path == c or path.startswith(c + "/") for c in covered):
            continue
        if path in covered:  # the whole folder kept: nothing of it is hidden
            covered.remove(path)
            continue
        held.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC), os.path.isdir(path)))
    for path, fd, _ in held:  # under a folder kept whole: nothing to bind
        if not any(path.startswith(c + "/") for c in covered):
            os.close(fd)
    held = [h for h in held if any(h[0].startswith(c + "/") for c in covered)]
    for folder in covered:
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for path, fd, is_dir in sorted(held):  # parents before children
        if is_dir:
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
        os.close(fd)
    return covered


def mount_points() -> set[str]:
    """Where this mount namespace has a mount (mountinfo's fifth field, its octal escapes undone)."""
    with open("/proc/self/mountinfo", "rb") as fh:
        return {os.fsdecode(line.split()[4].decode("unicode_escape").encode("latin-1")) for line in fh}


def _set_read_only(path: str, read_only: bool, recursive: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = _MountAttr(MOUNT_ATTR_RDONLY if read_only else 0, 0 if read_only else MOUNT_ATTR_RDONLY, 0, 0)
    if libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(),
                    ctypes.c_uint(AT_RECURSIVE if recursive else 0), ctypes.byref(attr),
                    ctypes.c_size_t(ctypes.sizeof(attr))) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount_setattr {path}: {os.strerror(err)}")


def read_only_except(writable: Iterable[str]) -> list[str]:
    """Make every mount of this (private) mount namespace read-only, in one step, except the
    ``writable`` folders: each becomes a mount of its own first (bound onto itself), then is made
    writable again alone, not its submounts. Raises OSError where the kernel lacks mount_setattr
    (before 5.12) or refuses; nothing is changed then. Returns the folders left writable."""
    keep = [os.path.realpath(p) for p in writable if p and os.path.isdir(p)]
    keep = list(dict.fromkeys(keep))
    points = mount_points()
    for path in keep:
        if path not in points:
            _mount(path, path, None, MS_BIND, None)
    _set_read_only("/", True, recursive=True)
    for path in keep:
        _set_read_only(path, False, recursive=False)
    return keep
