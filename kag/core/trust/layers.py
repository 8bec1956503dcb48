"""Which layers of the candidate's confinement this machine gives (``kag doctor``): each tried in a
throwaway child, with why not where it fails.

Trusted side. Nothing here confines a candidate (kag.core.trust.isolation does); a layer reported
"no" here is one every candidate of this machine runs without.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from typing import Any, Callable

from kag.core.trust.isolation import (CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, _unshare, is_root, own_mount_namespace,
                                      private_ipc, private_shm)


def _try_in_child(action: Callable[[], None]) -> str | None:
    """None when ``action`` works in a forked child (nothing of it reaches this process), else why not."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            action()
            os.write(w, b"ok")
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(w, f"{type(exc).__name__}: {exc}".encode()[:500])
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        answer = fh.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return None if answer == "ok" else (answer or "the probe died")


def seccomp_list() -> str:
    """Which filter a candidate gets (kag.core.trust.seccomp_allow)."""
    from kag.core.trust import seccomp_allow

    if seccomp_allow.available():
        return ": an allow-list (libseccomp; Docker's default profile, narrowed)"
    return ": a deny-list (libseccomp is not installed; install libseccomp2 for the allow-list)"


def _seal_a_page() -> None:
    """Seal one fresh page (in a throwaway child): whether the fatbin wall's pages can be sealed."""
    from kag.core.trust.fatbin_wall import seal

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, 4096, 1, 0x22, -1, 0)  # PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS
    if not seal(libc, page, 4096):
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()) or "mseal failed")


def _evaluation_namespaces() -> None:
    for done in (private_shm(()), private_ipc()):
        if not done.startswith("private"):
            raise OSError(done)


def _read_only_mounts() -> None:
    from kag.core.trust.private_mounts import read_only_except

    if not own_mount_namespace():
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    read_only_except([tempfile.gettempdir(), "/dev/shm", "/proc"])


def confinement_support() -> dict[str, Any]:
    """Which layers this machine gives a candidate (``kag doctor``), each tried in a child, with why
    not where it fails."""
    from kag.core.trust import confine

    def ns(flag: int) -> Callable[[], None]:
        def act() -> None:
            if not _unshare(flag):
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return act

    def verdict(problem: str | None, fallback: str) -> str:
        return "yes" if problem is None else f"no ({problem}); {fallback}"

    root = is_root()
    abi = confine.landlock_abi()
    support: dict[str, Any] = {
        "running as root": root,
        "pid namespace (all its processes die with it)": verdict(
            _try_in_child(ns(CLONE_NEWPID)) if root else "needs root", "a subreaper sweep kills them instead"),
        "network namespace": verdict(_try_in_child(ns(CLONE_NEWNET)) if root else "needs root",
                                     "Landlock (ABI 4+) blocks TCP instead"),
        "mount namespace (the host's Unix sockets hidden)": verdict(
            _try_in_child(ns(CLONE_NEWNS)) if root else "needs root",
            "candidates can connect to Unix sockets in /tmp and /run (Docker's, a Ray node's object store)"),
        "capabilities dropped": verdict(_try_in_child(confine.drop_capabilities), "it keeps root's powers")
        if root else "none to drop (not root)",
        "landlock": f"yes (ABI {abi})" if abi else "no: the kernel has no Landlock; candidates can read and "
                                                   "write what this user can",
        "seccomp": verdict(_try_in_child(lambda: confine.apply_seccomp(own_pid=os.getpid())),
                           "candidates can fork, exec and ptrace") + seccomp_list(),
        "host files read-only (mounts)": verdict(
            _try_in_child(_read_only_mounts) if root else "needs root",
            "a candidate can set the flags and generation of a file it reads (a channel, a change to the host)"),
        "the evaluation's own /dev/shm and IPC": verdict(
            _try_in_child(_evaluation_namespaces) if root else "needs root",
            "what a candidate leaves in /dev/shm (with CUDA) or in System V IPC outlives it"),
        "judge not dumpable": verdict(_try_in_child(lambda: confine.set_dumpable(False)),
                                      "a candidate of the same user can read the judge's memory"),
        "fatbin wall sealed (mseal)": verdict(_try_in_child(_seal_a_page),
                                             "on a GPU a solution could write PyTorch's GPU code back over the "
                                             "wall (Linux 6.10+ seals it)"),
    }
    if os.environ.get("KAG_CONFINE", "1") == "0":
        support["KAG_CONFINE"] = "0: Landlock and seccomp are OFF for candidates"
    return support
