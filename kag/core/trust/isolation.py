"""How the judge confines its candidate (which of these layers this machine has: kag.core.trust.layers).

Trusted side. The judge forks the candidate through ``fork_candidate``: as root, the child is the
first process of a new PID namespace (when it exits, the kernel kills every process it started,
however it started them: setsid, double fork, C++), and it enters a new network namespace; without
root, the judge is a child subreaper and ``process_tree.sweep_descendants`` kills what is left. In
the child, before anything else runs (one thread), ``CandidatePlan.apply_in_child`` drops every
capability, sets no_new_privs, scrubs the environment and applies Landlock (read: the system, Python, the
evaluations' folder, which none may list; write: its own temp folder, /dev/shm; devices: /dev/null...,
/dev/nvidia*). Its /dev/shm dies with the evaluation: without CUDA a tmpfs of its own, with CUDA the
judge's, which the judge made the evaluation's own before forking (``private_shm``); System V IPC is
the evaluation's own too (``private_ipc``). The environment block it was exec'd with is zeroed; what
the judge's Python held at the fork it can still read (the timeline's path, the judge's HOME, as an
independent attack found): nothing secret exists then, since the spec, the key and the seeds come after.
seccomp (no ptrace, process_vm_*, fork, exec, namespaces; file locks that lock nothing and no
inotify, so a concurrent candidate sees none through a file both read) follows in the candidate's
``prepare``, after CUDA has started and before model_new.py is imported; it also refuses every change
to a file's metadata (uid 0 owns the host's files; Landlock covers no chmod, chown, times or xattrs).
As root, every mount but the candidate's temp folder, /dev/shm and its /proc is read-only in its mount
namespace (``host_files_read_only``); the file systems' inode ioctls (flags, generation, fsxattr, ext4's
extent cache) are refused by the filter too, since the interpreter's own file (/proc/self/exe) keeps
the host's writable mount.
Known gaps: /proc/stat, /proc/loadavg, /proc/meminfo and /proc/sys are the host's (fs/file-nr, the count
of open files, carried 16/16 bits between candidates in an independent attack); the page cache (mincore,
read timing), free disk space and the CPUs are shared; /proc/self/pagemap's bit 56 says whether another
process maps a page of a file the candidate maps too (a bit a page, 15-16 of 16 through the confinement:
bench/scripts/pagemap_channel.py; it must read its own /proc, and Landlock cannot leave one file of it
out). Channels between concurrent candidates, none carrying a secret of the judge's (each evaluation's
are its own).

Why not another uid: CUDA IPC, which carries inputs and outputs between judge and candidate
without copies, refuses to map memory across uids (seen on the H100: cudaErrorMapBufferObjectFailed;
bench/scripts/gpu_probe_ipc_confine.py, bench/results/2026-11-23-d7aa418-h100/). uid 0 without
capabilities, inside Landlock, has no more reach than another uid.
"""

from __future__ import annotations

import ctypes
import os
import signal
import tempfile
from typing import Callable, Iterable

import attrs

from kag.core import scratch
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x4000, 1 << 18, 2, 4, 8
ENV_KEEP_PREFIXES = ("CUDA_", "NVIDIA_", "TORCH_", "PYTORCH_", "OMP_", "MKL_", "KMP_", "LC_")
ENV_KEEP = ("PATH", "LANG", "TZ", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHASHSEED", "VIRTUAL_ENV", "TERM",
            "KAG_TRACE")


EVALS_ROOT_MODE = 0o311  # enter and create, never list: not even its owner's uid (a candidate's, without capabilities)


def evals_root() -> str:
    """The folder under which evaluations put solutions and builds (readable by candidates, each at
    its own path). Nobody may list it: a candidate runs with the owner's uid, and with read on the
    folder it listed every evaluation's solution and build, a concurrent one's too."""
    root = os.path.join(tempfile.gettempdir(), f"kag-evals-{os.getuid()}")
    os.makedirs(root, mode=EVALS_ROOT_MODE, exist_ok=True)
    st = os.stat(root)
    if st.st_uid == os.getuid() and st.st_mode & 0o777 != EVALS_ROOT_MODE:  # made by an older kag: 0711
        os.chmod(root, EVALS_ROOT_MODE)
    return root


def minimal_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a trusted child (the judge) or an untrusted one starts from: what Python,
    torch and CUDA need, never API keys or tokens."""
    env = {k: v for k, v in os.environ.items() if k in ENV_KEEP or k.startswith(ENV_KEEP_PREFIXES)}
    env.update(extra or {})
    return env


def is_root() -> bool:
    return os.geteuid() == 0


# A candidate writes its own /proc entries: the CUDA driver names its threads there (cuInit fails with error
# 304 when /proc/self is read-only: bench/results/2026-11-27-d622266-h100). /proc/self/mem, which writes
# even read-only sealed private pages, cannot reach the walls' pages: they are shared mappings of
# write-sealed memory files (kag.core.trust.fatbin_wall.cover).
SELF = ("/proc/self",)


@attrs.define
class CandidatePlan:
    """What confines one candidate. ``applied`` is filled in the child (reported by its prepare)."""

    tmp_dir: str
    read_paths: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()  # files of libraries the walls removed (kag.core.trust.fatbin_wall, nvrtc_wall)
    optional: tuple[str, ...] = ()  # library files a task's policy may forbid too (cuBLAS, cuDNN): ``narrow``
    cuda: bool = True
    landlock: bool = True
    seccomp: bool = True
    namespaces: bool = True
    applied: list[str] = attrs.field(factory=list)
    devices: tuple[str, ...] = ()  # filled in the child: /dev cannot be listed once Landlock is on
    listings: dict[str, list[str]] = attrs.field(factory=dict)  # likewise the folders ``narrow`` must list

    def apply_in_child(self) -> None:
        """In the forked child, while it is the only thread: network namespace (root), no
        capabilities, no_new_privs, a scrubbed environment, Landlock. A layer the kernel lacks is
        recorded as missing; one that fails when it should work stops the child."""
        from kag.core.trust import confine

        if self.namespaces and is_root():
            if _unshare(CLONE_NEWNET):
                self.applied.append("network namespace")
            if os.getpid() == 1 and own_proc():  # the first process of its own PID namespace
                self.applied.append("pid namespace (own /proc)")
                self.hide_host_sockets()
                if self.landlock:  # KAG_CONFINE=0 (debugging a solution) keeps the host's files as they are
                    self.host_files_read_only()
        fresh = minimal_env({"HOME": self.tmp_dir, "TMPDIR": self.tmp_dir})
        ctypes.CDLL(None).clearenv()  # libc's table no longer points into the block erased below
        os.environ.clear()
        os.environ.update(fresh)
        tempfile.tempdir = None
        if erase_exec_environment():
            self.applied.append("exec environment erased")
        if is_root():
            confine.drop_capabilities()
            self.applied.append("no capabilities")
        confine.set_no_new_privs()
        self.applied.append("no_new_privs")
        confine.set_dumpable(True)  # the judge (its parent, outside its sandbox) reads its outputs from /proc/<pid>/mem
        if os.getpid() == 1:  # init of its PID namespace: the kernel ignores signals it sends itself
            abort_exits()
        if self.landlock and confine.landlock_abi() > 0:
            self.devices = tuple(confine.device_paths(self.cuda))
            self.listings = confine.holder_listings(self.unreadable + self.optional)
            policy = confine.LandlockPolicy(read=self.read_paths, write=(self.tmp_dir, "/dev/shm", *SELF),
                                            devices=self.devices, exclude=self.unreadable, listings=self.listings)
            abi = confine.apply_landlock(policy)
            self.applied.append(f"landlock (ABI {abi})")


    def narrow(self, unreadable: Iterable[str]) -> str:
        """One more Landlock layer, made when the task is known (the first is made at fork, before):
        the libraries the task's policy forbids (cuDNN where it has no convolution, cuBLAS where the
        user said so) unreadable too, so none is loaded afresh with its GPU code. Landlock binds only
        the calling thread, so this runs while the candidate is one thread; raises OSError otherwise
        or where the layer fails (the candidate must not go on with less than it was told)."""
        from kag.core.trust import confine

        more = tuple(p for p in unreadable if p not in self.unreadable)
        if not (self.landlock and more and confine.landlock_abi() > 0):
            return "landlock: nothing more to forbid"
        threads = len(os.listdir("/proc/self/task"))
        if threads != 1:
            raise OSError(f"the task's library policy cannot be applied: the candidate runs {threads} threads")
        self.unreadable = self.unreadable + more
        confine.apply_landlock(confine.LandlockPolicy(read=self.read_paths, write=(self.tmp_dir, "/dev/shm", *SELF),
                                                      devices=self.devices, exclude=self.unreadable,
                                                      listings=self.listings))
        return f"landlock: {len(more)} more libraries unreadable (the task's library policy)"

    def hide_host_sockets(self) -> None:
        """In its own mount namespace: empty /tmp and /run but for the candidate's own folders and
        what it reads (kag.core.trust.private_mounts), so the solution's code cannot connect to the
        host's Unix sockets: a Ray node's object store (code in the trusted worker that unpickles
        what it plants), Docker's (root on the host), kag serve's. /dev/shm is covered too where
        there is no CUDA; with CUDA it stays (below). NVIDIA's daemons' folders stay (CUDA talks to them)."""
        import glob

        from kag.core.trust.private_mounts import cover

        nvidia = [p for pattern in ("/run/nvidia*", "/var/run/nvidia*", "/tmp/nvidia*", "/tmp/.nvidia*")
                  for p in glob.glob(pattern)]
        # without CUDA the candidate's tensors reach the judge as passed descriptors, so its /dev/shm is
        # its own; with CUDA, torch's IPC opens its reference counters by name in /dev/shm, so it keeps
        # the judge's, which is the evaluation's own (``private_shm``): either way, what it leaves
        # there dies with the evaluation and no evaluation reads another's
        shared = ["/dev/shm"] if self.cuda else []
        try:
            cover([self.tmp_dir, *shared, *self.read_paths, *nvidia])
        except OSError as exc:  # a kernel that refuses tmpfs here: say so, as for any missing layer
            self.applied.append(f"host sockets visible ({exc.strerror})")
            return
        self.applied.append("private /tmp and /run")

    def host_files_read_only(self) -> None:
        """Every mount read-only but what the candidate writes (its temp folder, /dev/shm, its /proc):
        uid 0 owns the host's files, and an ioctl on a file it may only read changed that file's flags
        and generation (a channel to a concurrent candidate, and a change to the host) past Landlock
        (kag.core.trust.private_mounts.read_only_except; the filter refuses those ioctls as well)."""
        from kag.core.trust.private_mounts import read_only_except

        try:
            read_only_except([self.tmp_dir, "/dev/shm", "/proc"])
        except OSError as exc:
            self.applied.append(f"host files' flags writable ({exc.strerror})")
            return
        self.applied.append("host files read-only (mounts)")


def _host_kept(what: str) -> str | None:
    """Why the judge keeps the host's ``what`` (a namespace needs root; KAG_CONFINE=0 is debugging), or None."""
    if not is_root():
        return f"host {what} (not root)"
    return f"host {what} (KAG_CONFINE=0)" if os.environ.get("KAG_CONFINE", "1") == "0" else None


def private_shm(keep: Iterable[str]) -> str:
    """Give this process (the judge, first thing, while it is one thread) a mount namespace with a
    /dev/shm of its own, which its candidate and baseline runner inherit: what a candidate leaves
    there dies with the evaluation, and no evaluation meets another's there, with CUDA too (torch's
    IPC opens its reference counters by name in /dev/shm, so judge and candidate must share one).
    ``keep``: paths of the run that lie under /dev/shm (a TMPDIR, the lock folder), bound back in.
    Returns what was done, for the confinement report."""
    from kag.core.trust.private_mounts import cover

    why = _host_kept("/dev/shm")
    if why:
        return why
    if not own_mount_namespace():
        return f"host /dev/shm ({os.strerror(ctypes.get_errno())})"
    try:
        covered = cover(keep, folders=("/dev/shm",))
    except OSError as exc:
        return f"host /dev/shm ({exc.strerror})"
    return "private /dev/shm (the evaluation's own)" if covered else "host /dev/shm (a kept path is /dev/shm)"


def private_ipc() -> str:
    """Give this process (the judge, before it forks) an IPC namespace of its own, which its candidate
    and baseline runner inherit: System V shared memory, semaphores and message queues, and POSIX
    message queues, outlive the process that made them (a segment made with a fixed key stays until
    removed), so a candidate could leave one for a later or concurrent evaluation; here they die
    with the evaluation. Returns what was done, for the confinement report."""
    why = _host_kept("IPC")
    if why:
        return why
    if not _unshare(CLONE_NEWIPC):
        return f"host IPC ({os.strerror(ctypes.get_errno())})"
    return "private System V and POSIX message-queue IPC (the evaluation's own)"


def erase_exec_environment() -> bool:
    """Zero the environment block the judge was exec'd with. ``os.environ.clear()`` empties the
    table, not the strings: they stay on the stack, and ``/proc/self/environ`` shows them (the
    timeline's path, the judge's HOME and PYTHONPATH, the run's scratch tag). Call after ``clearenv``
    so nothing points into the block. False where the kernel does not say where the block is."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51 of stat(5)
    except (OSError, IndexError, ValueError):
        return False
    if not 0 < start < end:
        return False
    ctypes.memset(start, 0, end - start)
    return True


def own_mount_namespace() -> bool:
    """A new mount namespace whose mounts do not propagate back to the host's (errno says why not)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not _unshare(CLONE_NEWNS):
        return False
    return libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) == 0


def own_proc() -> bool:
    """In a new mount namespace, mount a /proc of this PID namespace over the host's: CUDA's driver
    reads /proc/<getpid()>, which must be this process (pid 1 here), and no other process of the
    machine is visible at all."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not own_mount_namespace():
        return False
    return libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None) == 0


ABORT_STATUS = int(signal.SIGABRT)  # the exit status of a candidate that called abort() as pid 1


def abort_exits() -> None:
    """A PID namespace's first process ignores the default-action signals it sends itself, so
    abort() (a failed assert in C++) would end in SIGSEGV; make SIGABRT call _exit(SIGABRT) instead."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal(ctypes.c_int(signal.SIGABRT), ctypes.cast(libc._exit, ctypes.c_void_p))


SOCKET_SAFE_BASE = 40  # AF_UNIX paths end at 107 bytes; multiprocessing nests pymp-*/listener-* (~50) in here


def socket_safe_tempdir() -> str | None:
    """The folder for a temp folder that will hold Unix sockets: the user's temp dir when its path
    is short enough, else ``/tmp`` (or ``/dev/shm``). A long ``TMPDIR`` would otherwise end the
    CPU candidate's output hand-over (torch's fd passing binds a socket under the candidate's
    TMPDIR) in "AF_UNIX path too long", a reward of -1 for a correct solution."""
    base = tempfile.gettempdir()
    if len(base) <= SOCKET_SAFE_BASE:
        return None
    for short in ("/tmp", "/dev/shm"):
        if os.path.isdir(short) and os.access(short, os.W_OK | os.X_OK):
            return short
    return None


def candidate_plan(cuda: bool, protected: tuple[str, ...] = ()) -> CandidatePlan:
    """A plan with a fresh temp folder and the read paths of this machine; ``KAG_CONFINE=0`` turns
    Landlock and seccomp off (for debugging a solution the sandbox breaks; never for scoring)."""
    from kag.core.eval.orchestrator.build import cache_root, trusted_stores
    from kag.core.trust.confine import system_read_paths

    tmp = scratch.mkdtemp("kag-cand-", socket_safe_tempdir())
    guarded = (*trusted_stores(), *protected)
    import kag

    package = os.path.dirname(os.path.realpath(kag.__file__))  # an editable install is not on sys.path
    reads = tuple(system_read_paths(guarded)) + (evals_root(), package)
    off = os.environ.get("KAG_CONFINE", "1") == "0"
    unreadable: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    if cuda and not off:  # what the fatbin wall removes must not be read back from the files, nor NVRTC
        from kag.core.trust.fatbin_wall import archive_files, compiler_files, fatbin_files

        unreadable = (tuple(fatbin_files(cache_dir=str(cache_root()))) + tuple(compiler_files(str(cache_root())))
                      + tuple(archive_files(str(cache_root()))))
        optional = tuple(sorted(set(fatbin_files(False, False, str(cache_root()))) - set(unreadable)))
    return CandidatePlan(tmp_dir=tmp, read_paths=reads, unreadable=unreadable, optional=optional, cuda=cuda,
                         landlock=not off, seccomp=not off)


def _unshare(flags: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(ctypes.c_int(flags)) == 0


def _after_fork() -> None:
    """What multiprocessing's own fork runs in a child: its per-process state reset. Without it a
    child inherits the parent's resource-sharer listener (no thread serves it here), so a tensor it
    sends by file descriptor points the reader at the parent, which has no such fd: EOFError."""
    import multiprocessing.util

    multiprocessing.util._run_after_forkers()


def fork_in_namespace(child: Callable[[], None], new_pid_ns: bool) -> tuple[int, bool]:
    """fork(); with ``new_pid_ns`` (root only) the child is the first process of a new PID
    namespace. Returns (pid, whether the namespace was made). The caller's own children made later
    stay in its namespace."""
    own = None
    made = False
    if new_pid_ns and is_root():
        own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        made = _unshare(CLONE_NEWPID)
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                _after_fork()
                child()
                code = 0
            except BaseException:  # noqa: BLE001 - the parent sees the exit status
                code = 1
            finally:
                os._exit(code)
    finally:
        if own is not None:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.setns(own, CLONE_NEWPID)
            os.close(own)
    return pid, made
