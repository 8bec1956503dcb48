"""The candidate's confinement, attacked from inside a confined child the way the judge makes one
(kag.core.trust.isolation.CandidatePlan, fork_in_namespace), on this machine's real kernel. Layers the
kernel lacks skip with the reason (``kag doctor`` reports the same)."""

from __future__ import annotations

import ctypes
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from kag.core.trust import confine
from kag.core.trust.isolation import CandidatePlan, candidate_plan, fork_in_namespace, is_root
from kag.core.trust.layers import confinement_support
from tests.core.trust.forked import in_forked_child, syscall

NEEDS_LANDLOCK = pytest.mark.skipif(confine.landlock_abi() == 0, reason="the kernel has no Landlock")
NEEDS_SECCOMP = pytest.mark.skipif(confine.arch() not in confine.SYSCALLS, reason="no seccomp filter for this arch")
NEEDS_ROOT = pytest.mark.skipif(not is_root(), reason="namespaces and capabilities need root")


def in_confined_child(plan: CandidatePlan, attack: Callable[[int], dict], seccomp: bool = True,
                      allow_list: bool = True) -> dict:
    """Run ``attack(parent_pid)`` in a child confined like a candidate (the parent made non-dumpable,
    as the judge is); its findings come back as JSON."""
    r, w = os.pipe()
    parent = os.getpid()
    confine.set_dumpable(False)
    try:
        def child() -> None:
            os.close(r)
            plan.apply_in_child()
            if seccomp:
                confine.apply_seccomp(own_pid=os.getpid(), allow_list=allow_list)
            os.write(w, json.dumps(attack(parent)).encode())

        pid, _ = fork_in_namespace(child, plan.namespaces)
        os.close(w)
        with os.fdopen(r, "rb") as fh:
            data = fh.read()
        os.waitpid(pid, 0)
    finally:
        confine.set_dumpable(True)
    assert data, "the confined child died before reporting"
    return json.loads(data)


def tries(fn: Callable[[], object]) -> str:
    try:
        fn()
        return "ALLOWED"
    except OSError as exc:
        return f"denied ({exc.strerror})"


@pytest.fixture
def plan(tmp_path: Path) -> CandidatePlan:
    p = candidate_plan(cuda=False)
    yield p
    import shutil

    shutil.rmtree(p.tmp_dir, ignore_errors=True)


@NEEDS_LANDLOCK
@NEEDS_SECCOMP
def test_the_candidate_cannot_read_or_write_the_judge(plan: CandidatePlan) -> None:
    def attack(judge: int) -> dict:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        out = {what: tries(lambda w=what: open(f"/proc/{judge}/{w}", "rb").close()) for what in ("mem", "environ")}
        out["fd"] = tries(lambda: os.listdir(f"/proc/{judge}/fd"))
        out["ptrace"] = "ALLOWED" if libc.ptrace(16, judge, None, None) == 0 else "denied"
        out["process_vm_readv"] = "ALLOWED" if libc.syscall(310, judge, None, 0, None, 0, 0) >= 0 else "denied"
        out["kill"] = tries(lambda: os.kill(judge, 0))
        return out

    found = in_confined_child(plan, attack)
    assert all(v.startswith("denied") for v in found.values()), found


def test_the_candidate_finds_nothing_of_the_exec_environment(plan: CandidatePlan) -> None:
    """The environment block a process was exec'd with outlives ``os.environ.clear()``: by the file
    /proc/self/environ and by reading the block's memory, the candidate finds no variable of it."""
    marker = f"kag-exec-marker-{os.getpid()}"
    probe = (
        "import ctypes, json\n"
        "from tests.core.trust.test_isolation import CandidatePlan, in_confined_child\n"
        "def attack(_):\n"
        "    with open('/proc/self/stat') as fh:\n"
        "        f = fh.read().rsplit(')', 1)[1].split()\n"
        "    start, end = int(f[47]), int(f[48])\n"
        "    return {'file': open('/proc/self/environ', 'rb').read().decode('latin-1'),\n"
        "            'memory': ctypes.string_at(start, end - start).decode('latin-1')}\n"
        f"plan = CandidatePlan(tmp_dir={plan.tmp_dir!r}, cuda=False, landlock=False, seccomp=False)\n"
        "print(json.dumps(in_confined_child(plan, attack, seccomp=False)))\n")
    proc = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "KAG_EXEC_MARKER": marker},
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    for route, text in found.items():
        assert marker not in text and "PATH=" not in text, (route, text[:200])


@NEEDS_LANDLOCK
def test_the_candidate_writes_only_its_own_folder_and_reads_no_cache(plan: CandidatePlan, tmp_path: Path) -> None:
    from kag.core.eval.orchestrator.build import cache_root

    host = tmp_path / "host-file"
    host.write_text("host")
    cache = cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "doctor-probe").write_text("secret")

    def attack(_: int) -> dict:
        return {"own": tries(lambda: Path(plan.tmp_dir, "x").write_text("1")),
                "host": tries(lambda: host.write_text("pwned")),
                "tmp": tries(lambda: Path("/tmp", f"kag-probe-{os.getpid()}").write_text("1")),
                "cache read": tries(lambda: (cache / "doctor-probe").read_text()),
                "cache write": tries(lambda: (cache / "baselines.json").write_text("{}")),
                "env": sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k)}

    os.environ["OPENAI_API_KEY"] = "sk-test-never-in-the-candidate"
    try:
        found = in_confined_child(plan, attack, seccomp=False)
    finally:
        del os.environ["OPENAI_API_KEY"]
    assert found["own"] == "ALLOWED", found
    assert all(found[k].startswith("denied") for k in ("host", "tmp", "cache read", "cache write")), found
    assert found["env"] == [] and host.read_text() == "host"


@NEEDS_SECCOMP
def test_seccomp_refuses_process_creation_and_exec_but_not_threads() -> None:
    def attack(_: int) -> dict:
        import threading

        libc = ctypes.CDLL(None, use_errno=True)
        out = {"fork": tries(os.fork), "exec": tries(lambda: os.execv("/bin/true", ["true"])),
               "libc fork": "ALLOWED" if libc.fork() >= 0 else "denied"}
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        out["thread"] = "ALLOWED"
        return out

    plan = CandidatePlan(tmp_dir="/tmp", landlock=False, namespaces=False)
    found = in_confined_child(plan, attack)
    assert found == {"fork": "denied (Operation not permitted)", "exec": "denied (Operation not permitted)",
                     "libc fork": "denied", "thread": "ALLOWED"}, found


@NEEDS_ROOT
def test_every_process_of_the_candidate_dies_with_it_in_its_namespace() -> None:
    """Without seccomp (as on a kernel that lacks it) a double fork with setsid escapes the session;
    the PID namespace still takes it down when the candidate exits."""
    r, w = os.pipe()

    def candidate() -> None:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.write(w, os.readlink("/proc/self").encode().ljust(16))  # its pid as the host sees it
                time.sleep(60)
            os._exit(0)
        time.sleep(0.5)

    pid, made = fork_in_namespace(candidate, new_pid_ns=True)
    assert made
    escapee = int(os.read(r, 16))
    assert os.path.exists(f"/proc/{escapee}")  # alive while the candidate lives
    os.waitpid(pid, 0)
    for _ in range(100):
        try:
            with open(f"/proc/{escapee}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"process {escapee} outlived the candidate's namespace")


def test_a_subreaper_sweep_finds_double_forked_orphans() -> None:
    """Without a PID namespace (not root), the judge is a subreaper: orphans come back to it."""
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(60)\n"
            "    os._exit(0)\n")
    import subprocess

    script = ("import ctypes, subprocess, sys, time\n"
              "ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)\n"
              f"subprocess.run([sys.executable, '-c', {code!r}])\n"
              "time.sleep(0.3)\n"
              "from kag.core.trust.process_tree import descendants, sweep_descendants\n"
              "import os\n"
              "found = descendants(os.getpid())\n"
              "killed = sweep_descendants(os.getpid())\n"
              "print(len(found), killed, len(descendants(os.getpid())))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    found, killed, left = map(int, out.stdout.split())
    assert found == 1 and killed >= 1 and left == 0


def test_doctor_reports_every_layer() -> None:
    support = confinement_support()
    for layer in ("landlock", "seccomp", "pid namespace (all its processes die with it)", "judge not dumpable",
                  "mount namespace (the host's Unix sockets hidden)", "fatbin wall sealed (mseal)",
                  "the evaluation's own /dev/shm and IPC", "host files read-only (mounts)"):
        assert layer in support
    if is_root():
        assert support["the evaluation's own /dev/shm and IPC"] == "yes", support
        assert support["host files read-only (mounts)"] == "yes", support
    if confine.landlock_abi():
        assert support["landlock"].startswith("yes")
    if tuple(int(p) for p in os.uname().release.split(".")[:2] if p.isdigit()) >= (6, 10):
        assert support["fatbin wall sealed (mseal)"] == "yes", support  # this VM's 6.18, the H100's 6.18


@NEEDS_LANDLOCK
@NEEDS_SECCOMP
def test_a_candidates_file_locks_and_watches_reach_no_other_process(plan: CandidatePlan) -> None:
    """A lock on a file two processes can open was a channel between concurrent candidates (one
    locks a file of torch's, the other tries it). The candidate's locks succeed without locking,
    by flock, by a record lock and by an open-file-description lock, and it may not watch files:
    another process takes every lock while the candidate "holds" them."""
    import fcntl
    import threading

    if not __import__("kag.core.trust.seccomp_allow", fromlist=["available"]).available():
        pytest.skip("libseccomp is not installed (the hand-built filter keeps file locks)")
    target, records = Path(plan.tmp_dir) / "shared.lock", Path(plan.tmp_dir) / "records.lock"
    for f in (target, records):  # record and description locks of one process conflict: two files
        f.write_bytes(b"x" * 16)
    held, checked = os.pipe(), os.pipe()
    other: dict = {}

    def ofd(fd: int, kind: int) -> None:
        fcntl.fcntl(fd, 37, struct.pack("hhqqi4x", kind, 0, 0, 0, 0))  # F_OFD_SETLK, the whole file

    def attack(_: int) -> dict:
        out = {}
        fds = [os.open(f, os.O_RDWR) for f in (target, records, target)]
        out["flock"] = tries(lambda: fcntl.flock(fds[0], fcntl.LOCK_EX | fcntl.LOCK_NB))
        out["record lock"] = tries(lambda: fcntl.lockf(fds[1], fcntl.LOCK_EX | fcntl.LOCK_NB))
        out["ofd lock"] = tries(lambda: ofd(fds[2], fcntl.F_WRLCK))
        libc = ctypes.CDLL(None, use_errno=True)
        out["inotify"] = "ALLOWED" if libc.inotify_init1(0) >= 0 else f"denied ({os.strerror(ctypes.get_errno())})"
        os.write(held[1], b"x")
        os.read(checked[0], 1)  # holding whatever it holds until the other process has tried
        return out

    def other_process() -> None:
        os.read(held[0], 1)
        for name, f, take in (("flock", target, lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)),
                              ("record lock", records, lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)),
                              ("ofd lock", target, lambda fd: ofd(fd, fcntl.F_WRLCK))):
            fd = os.open(f, os.O_RDWR)  # each taken and let go alone
            other[name] = tries(lambda: take(fd))
            os.close(fd)
        os.write(checked[1], b"x")

    t = threading.Thread(target=other_process, daemon=True)  # a child that died early leaves it waiting
    t.start()
    found = in_confined_child(plan, attack)
    t.join(timeout=30)
    assert found == {"flock": "ALLOWED", "record lock": "ALLOWED", "ofd lock": "ALLOWED",
                     "inotify": "denied (Operation not permitted)"}, found
    assert other == {"flock": "ALLOWED", "record lock": "ALLOWED", "ofd lock": "ALLOWED"}, other


@NEEDS_LANDLOCK
@NEEDS_SECCOMP
def test_the_candidate_changes_no_files_metadata(plan: CandidatePlan) -> None:
    """uid 0 without capabilities still owns the host's files, and Landlock covers no metadata: an
    independent attack set a setuid bit on a host file it could only read, made the evaluations' folder
    listable, and passed bits to a concurrent candidate in a file's times. Every such change is refused,
    by descriptor and by path, and the file is as it was."""
    from kag.core.trust import seccomp_allow
    from kag.core.trust.isolation import evals_root

    if not seccomp_allow.available():
        pytest.skip("libseccomp is not installed")
    target = Path(plan.tmp_dir) / "host_file"
    target.write_bytes(b"x")
    target.chmod(0o644)
    root = evals_root()
    before = (target.stat(), os.stat(root))

    def attack(_: int) -> dict:
        import fcntl

        fd = os.open(target, os.O_RDONLY)  # read-only: what it may do to any file it can read
        return {"fchmod setuid": tries(lambda: os.fchmod(fd, 0o4755)),
                "chmod by path": tries(lambda: os.chmod(target, 0o666)),
                "chmod the evaluations' folder": tries(lambda: os.chmod(root, 0o755)),
                "fchown": tries(lambda: os.fchown(fd, 0, 0)),
                "utime by descriptor": tries(lambda: os.utime(fd, ns=(123456789, 987654321))),
                "utime by path": tries(lambda: os.utime(target, ns=(123456789, 987654321))),
                "setxattr": tries(lambda: os.setxattr(fd, "user.msg", b"hello")),
                "removexattr": tries(lambda: os.removexattr(target, "user.none")),
                "write-life hint": tries(lambda: fcntl.fcntl(fd, 1036, struct.pack("Q", 5)))}

    found = in_confined_child(plan, attack)
    assert all(v == "denied (Operation not permitted)" for v in found.values()), found
    after = (target.stat(), os.stat(root))
    for a, b in zip(before, after):
        assert (a.st_mode, a.st_uid, a.st_mtime_ns, a.st_atime_ns) == (b.st_mode, b.st_uid, b.st_mtime_ns, b.st_atime_ns)


FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IOC_GETVERSION, FS_IOC_SETVERSION = 0x80086601, 0x40086602, 0x80087601, 0x40087602
FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR = 0x801C581F, 0x401C5820


def inode_marks(path: Path) -> tuple:
    """A file's flags, generation and fsxattr, as far as its file system keeps them (None where not)."""
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    try:
        out = []
        for request, size in ((FS_IOC_GETFLAGS, 8), (FS_IOC_GETVERSION, 8), (FS_IOC_FSGETXATTR, 28)):
            try:
                out.append(fcntl.ioctl(fd, request, bytes(size)))
            except OSError:
                out.append(None)
        return tuple(out)
    finally:
        os.close(fd)


@NEEDS_ROOT
@NEEDS_LANDLOCK
def test_the_candidate_changes_no_flags_of_a_file_it_reads(plan: CandidatePlan) -> None:
    """Landlock governs opening and writing, not an ioctl on a file opened to read: a confined child set
    a host file's no-atime flag and its 32-bit generation (a channel to a concurrent candidate that
    outlives both). Every mount but its own folders is read-only: each route gets EROFS, the file is as
    it was. Routes: Python's fcntl.ioctl, libc's ioctl through ctypes, and the fsxattr form."""
    import fcntl
    import uuid

    from kag.core.trust.isolation import evals_root

    folder = Path(evals_root()) / f"flags-{uuid.uuid4().hex}"  # a folder every candidate may read
    folder.mkdir()
    target = folder / "shared"
    target.write_bytes(b"x")
    before = inode_marks(target)
    if before[0] is None:
        pytest.skip("this file system keeps no inode flags")
    try:
        def attack(_: int) -> dict:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(target, os.O_RDONLY)
            flags = struct.unpack("q", fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8)))[0]

            def by_libc(request: int, value: int) -> None:
                arg = ctypes.c_long(value)
                if libc.ioctl(fd, ctypes.c_ulong(request), ctypes.byref(arg)) != 0:
                    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

            xattr = bytearray(fcntl.ioctl(fd, FS_IOC_FSGETXATTR, bytes(28)))
            xattr[0:4] = struct.pack("I", struct.unpack("I", xattr[0:4])[0] | 0x40)  # FS_XFLAG_NOATIME
            return {"no-atime flag (fcntl)": tries(lambda: fcntl.ioctl(fd, FS_IOC_SETFLAGS,
                                                                         struct.pack("q", flags | 0x80))),
                    "generation (fcntl)": tries(lambda: fcntl.ioctl(fd, FS_IOC_SETVERSION, struct.pack("q", 12345))),
                    "no-dump flag (libc)": tries(lambda: by_libc(FS_IOC_SETFLAGS, flags | 0x40)),
                    "generation (libc)": tries(lambda: by_libc(FS_IOC_SETVERSION, 54321)),
                    "fsxattr": tries(lambda: fcntl.ioctl(fd, FS_IOC_FSSETXATTR, bytes(xattr))),
                    "own temp folder writable": tries(lambda: Path(plan.tmp_dir, "mine").write_bytes(b"y"))}

        found = in_confined_child(plan, attack, seccomp=False)  # the mounts alone, not the filter
        assert found.pop("own temp folder writable") == "ALLOWED", found
        assert all(v == "denied (Read-only file system)" for v in found.values()), found
        assert inode_marks(target) == before
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


EXT4_IOC_CLEAR_ES_CACHE, FS_IOC_FIEMAP, FIONREAD = 0x6628, 0xC020660B, 0x541B


@NEEDS_ROOT
@NEEDS_LANDLOCK
@NEEDS_SECCOMP
@pytest.mark.parametrize("allow_list", [True, False], ids=["allow-list", "deny-list"])
def test_no_inode_ioctl_reaches_a_file_whose_mount_is_the_hosts(plan: CandidatePlan, tmp_path: Path,
                                                                allow_list: bool) -> None:
    """The read-only mounts cover the paths a candidate resolves, not a file whose mount is the host's:
    an independent attack set the interpreter's generation and flags by /proc/self/exe, and passed bits
    to another candidate through ext4's extent cache (one clears it, the other counts it) with no write
    at all. The filter refuses the file systems' inode ioctls by type, whatever the mount (ENOTTY, as a
    file system without them answers), in both filters; other ioctls still work. Here the host's mount
    is reached by a descriptor opened before the fork, as the interpreter's is by its exec."""
    import fcntl

    from kag.core.trust import seccomp_allow

    if allow_list and not seccomp_allow.available():
        pytest.skip("libseccomp is not installed")
    target = tmp_path / "host_file"
    target.write_bytes(b"x" * 8192)
    before = inode_marks(target)
    if before[0] is None:
        pytest.skip("this file system keeps no inode flags")
    held = os.open(target, os.O_RDONLY)  # its mount is the host's, writable: not the candidate's copy
    try:
        def attack(_: int) -> dict:
            try:
                flags = struct.unpack("q", fcntl.ioctl(held, FS_IOC_GETFLAGS, bytes(8)))[0]
            except OSError:
                flags = 0x80000  # extents: what ext4 keeps anyway
            exe = os.open("/proc/self/exe", os.O_RDONLY)
            r, _w = os.pipe()
            return {"no-atime flag": tries(lambda: fcntl.ioctl(held, FS_IOC_SETFLAGS, struct.pack("q", flags | 0x80))),
                    "generation": tries(lambda: fcntl.ioctl(held, FS_IOC_SETVERSION, struct.pack("q", 12345))),
                    "fsxattr": tries(lambda: fcntl.ioctl(held, FS_IOC_FSSETXATTR, bytes(28))),
                    "extent cache cleared": tries(lambda: fcntl.ioctl(held, EXT4_IOC_CLEAR_ES_CACHE)),
                    "extent map": tries(lambda: fcntl.ioctl(held, FS_IOC_FIEMAP, bytes(32))),
                    "the interpreter's flags (read)": tries(lambda: fcntl.ioctl(exe, FS_IOC_GETFLAGS, bytes(8))),
                    "the interpreter's generation (read)": tries(lambda: fcntl.ioctl(exe, FS_IOC_GETVERSION, bytes(8))),
                    "bytes waiting in a pipe (honest)": tries(lambda: fcntl.ioctl(r, FIONREAD, bytes(4)))}

        found = in_confined_child(plan, attack, allow_list=allow_list)
    finally:
        os.close(held)
    assert found.pop("bytes waiting in a pipe (honest)") == "ALLOWED", found
    assert all(v == "denied (Inappropriate ioctl for device)" for v in found.values()), found
    assert inode_marks(target) == before


@NEEDS_ROOT
@NEEDS_LANDLOCK
@NEEDS_SECCOMP
@pytest.mark.parametrize("allow_list", [True, False], ids=["allow-list", "deny-list"])
def test_no_metadata_call_by_path_reaches_a_file_on_the_hosts_mount(plan: CandidatePlan, tmp_path: Path,
                                                                    allow_list: bool) -> None:
    """/proc/self/fd/N (and /proc/self/exe) resolve to a file on the host's writable mount, past the
    read-only mounts. Every call that changes metadata by path is refused there in both filters: the old
    ones, and Linux 6.13's setxattrat/removexattrat and 6.17's file_setattr, which the hand-built deny-list
    let through (an xattr and a no-atime xflag set on a host file). A kernel without a call says so
    (ENOSYS): refused all the same."""
    import fcntl

    from kag.core.trust import seccomp_allow

    if allow_list and not seccomp_allow.available():
        pytest.skip("libseccomp is not installed")
    target = tmp_path / "host_file"
    target.write_bytes(b"x")
    held = os.open(target, os.O_RDONLY)
    value = ctypes.create_string_buffer(b"hello")

    def state() -> tuple:
        st = target.stat()
        return st.st_mode, st.st_mtime_ns, tuple(os.listxattr(target)), fcntl.ioctl(held, FS_IOC_FSGETXATTR, bytes(28))

    before = state()
    try:
        def attack(_: int) -> dict:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            path = f"/proc/self/fd/{held}".encode()

            def raw(nr: int, *args: object) -> None:
                if libc.syscall(ctypes.c_long(nr), ctypes.c_int(-100), path, *args) != 0:  # AT_FDCWD
                    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

            xattr_args = ctypes.create_string_buffer(struct.pack("QII", ctypes.addressof(value), 5, 0))
            file_attr = ctypes.create_string_buffer(struct.pack("QIIII", 0x40, 0, 0, 0, 0))  # FS_XFLAG_NOATIME
            return {"chmod": tries(lambda: os.chmod(path, 0o4755)),
                    "utime": tries(lambda: os.utime(path, ns=(1, 2))),
                    "setxattr": tries(lambda: os.setxattr(path, "user.k", b"v")),
                    "setxattrat": tries(lambda: raw(463, ctypes.c_uint(0), b"user.k", xattr_args, ctypes.c_size_t(16))),
                    "removexattrat": tries(lambda: raw(466, ctypes.c_uint(0), b"user.none")),
                    "file_setattr": tries(lambda: raw(469, file_attr, ctypes.c_size_t(24), ctypes.c_uint(0)))}

        found = in_confined_child(plan, attack, allow_list=allow_list)
        assert all(v.startswith("denied") for v in found.values()), found
        assert state() == before
    finally:
        os.close(held)


@NEEDS_ROOT
@NEEDS_LANDLOCK
@NEEDS_SECCOMP
@pytest.mark.parametrize("allow_list", [True, False], ids=["allow-list", "deny-list"])
def test_no_hint_or_watch_outlives_a_candidate_on_a_file_it_reads(plan: CandidatePlan, tmp_path: Path,
                                                                  allow_list: bool) -> None:
    """Channels an independent attack found on files a candidate may only read: a write-life hint set by
    the owner on a read-only descriptor stays on the inode for a later candidate (32/32 bits with the
    hand-built deny-list), and fanotify's file marks do what inotify was refused for. With the
    allow-list, madvise(MADV_PAGEOUT) evicted a shared file's pages (fadvise's eviction, faked, by
    another door: 16/16 bits): now it succeeds and does nothing. Both filters refuse the first two."""
    import fcntl
    import mmap

    from kag.core.trust import seccomp_allow

    if allow_list and not seccomp_allow.available():
        pytest.skip("libseccomp is not installed")
    target = tmp_path / "host_file"
    target.write_bytes(os.urandom(64 * 4096))
    held = os.open(target, os.O_RDONLY)
    os.fsync(held)  # clean pages: those the kernel pages out at once
    try:
        def attack(_: int) -> dict:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
            libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
            out = {"write-life hint": tries(lambda: fcntl.fcntl(held, 1036, struct.pack("Q", 5))),
                   # a command later than Linux 6.18's (6.19's delegations: a lease by another name)
                   "unknown command": tries(lambda: fcntl.fcntl(held, 1040, struct.pack("QQQ", 0, 0, 0))),
                   "fanotify": "denied" if libc.fanotify_init(0x200, 0) < 0 else "ALLOWED"}  # FAN_REPORT_FID
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_long]
            address = libc.mmap(None, 64 * 4096, mmap.PROT_READ, mmap.MAP_SHARED, held, 0)
            ctypes.string_at(address, 64 * 4096)  # every page loaded
            rc = libc.madvise(address, 64 * 4096, 21)  # MADV_PAGEOUT
            resident = ctypes.create_string_buffer(64)
            libc.mincore(address, 64 * 4096, resident)
            out["pageout"] = (rc, sum(b & 1 for b in resident.raw))
            return out

        found = in_confined_child(plan, attack, allow_list=allow_list)
    finally:
        os.close(held)
    rc, resident = found.pop("pageout")
    unknown = found.pop("unknown command")
    assert all(v.startswith("denied") for v in found.values()), found
    if allow_list:  # refused by the filter (EPERM), not by the kernel's not knowing it (EINVAL)
        assert unknown == "denied (Operation not permitted)", unknown
    if allow_list:  # the hand-built deny-list keeps page-cache advice real (confine.NO_METADATA's note)
        assert (rc, resident) == (0, 64), (rc, resident)


@NEEDS_ROOT
def test_the_candidate_cannot_raise_its_own_priority(plan: CandidatePlan) -> None:
    """The judge raises its timed child for its windows (kag.core.eval.judge.priority) and puts it back;
    a candidate may not do either itself, by nice, a real-time policy or the limit that allows them."""
    import resource

    def attack(_: int) -> dict:
        libc = ctypes.CDLL(None, use_errno=True)

        class Param(ctypes.Structure):
            _fields_ = [("priority", ctypes.c_int)]

        def fifo() -> None:
            if libc.sched_setscheduler(0, 1, ctypes.byref(Param(1))) != 0:  # SCHED_FIFO
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

        return {"nice -5": tries(lambda: os.setpriority(os.PRIO_PROCESS, 0, -5)),
                "nice -5 by thread id": tries(lambda: os.setpriority(os.PRIO_PROCESS, threading_id(), -5)),
                "SCHED_FIFO": tries(fifo),
                "RLIMIT_NICE 40": limit(resource.RLIMIT_NICE, 40),
                "RLIMIT_RTPRIO 1": limit(resource.RLIMIT_RTPRIO, 1),
                "nice now": os.getpriority(os.PRIO_PROCESS, 0)}

    found = in_confined_child(plan, attack)
    assert found.pop("nice now") == 0, found
    assert all(v.startswith("denied") for v in found.values()), found


def limit(which: int, value: int) -> str:
    """Raise a resource limit, soft and hard: a hard limit goes up only with CAP_SYS_RESOURCE."""
    import resource

    try:
        resource.setrlimit(which, (value, value))
        return "ALLOWED"
    except (OSError, ValueError) as exc:
        return f"denied ({exc})"


def threading_id() -> int:
    import threading

    return threading.get_native_id()


def test_seccomp_program_allows_signals_only_to_itself() -> None:
    prog = confine.seccomp_program(own_pid=1234)
    assert len(prog) % 8 == 0 and len(prog) // 8 < 200
    if confine.arch() not in confine.SYSCALLS:
        pytest.skip("no syscall table for this arch")

    def attack(_: int) -> dict:
        me = os.getpid()
        return {"self": tries(lambda: os.kill(me, 0)), "group": tries(lambda: os.kill(0, 0)),
                "init": tries(lambda: os.kill(1, 0)) if me != 1 else "denied (own pid is 1)"}

    found = in_confined_child(CandidatePlan(tmp_dir="/tmp", landlock=False, namespaces=False), attack)
    assert found["self"] == "ALLOWED" and found["group"] == "ALLOWED" and found["init"].startswith("denied")


def test_the_hand_built_filter_refuses_what_the_allow_list_does_for_the_wall_and_the_judge() -> None:
    """Where libseccomp is missing: a candidate may not grow a file mapping (the fatbin wall) or
    clear the signal that ends it with its judge; other prctl options still work."""
    if confine.arch() != "x86_64":
        pytest.skip("syscall numbers below are x86_64's")
    def work(out: dict) -> None:
        prog = confine.seccomp_program(own_pid=os.getpid())
        filters = ctypes.create_string_buffer(prog)
        fprog = ctypes.create_string_buffer(struct.pack("=HxxxxxxQ", len(prog) // 8, ctypes.addressof(filters)))
        confine.set_no_new_privs()
        confine._syscall(317, ctypes.c_uint(1), ctypes.c_uint(0), fprog)
        name = ctypes.create_string_buffer(16)
        for label, nr, args in (("pdeathsig", 157, (1, 0)), ("pdeathsig_high", 157, (0x100000001, 0)),
                                ("subreaper", 157, (36, 1)), ("mremap", 25, (0, 4096, 8192, 0)),
                                ("get_name", 157, (16, ctypes.addressof(name)))):
            out[label] = syscall(nr, *args)

    got = in_forked_child(work, {})
    assert got == {"pdeathsig": "EPERM", "pdeathsig_high": "EPERM", "subreaper": "EPERM", "mremap": "EPERM",
                   "get_name": "ran"}, got


def test_a_long_tmpdir_still_lets_the_candidate_pass_file_descriptors(tmp_path, monkeypatch):
    """The CPU hand-over passes outputs through torch's fd sharing, which binds a Unix socket under
    the candidate's TMPDIR: with a long TMPDIR it failed ("AF_UNIX path too long") and a correct
    solution got -1. The candidate's folder goes where a socket path fits."""
    import shutil
    import tempfile

    long_dir = tmp_path / ("long-tmpdir-" * 8)
    long_dir.mkdir()
    monkeypatch.setenv("TMPDIR", str(long_dir))
    monkeypatch.setattr(tempfile, "tempdir", None)
    plan = candidate_plan(cuda=False)
    try:
        probe = ("import os, tempfile; from multiprocessing import resource_sharer; "
                 "resource_sharer.DupFd(os.open(os.devnull, os.O_RDONLY)); print(tempfile.gettempdir())")
        proc = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "TMPDIR": plan.tmp_dir},
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == plan.tmp_dir
    finally:
        shutil.rmtree(plan.tmp_dir, ignore_errors=True)


@NEEDS_ROOT
def test_the_judges_dev_shm_is_the_evaluations_own_and_its_candidate_meets_it_there(tmp_path: Path) -> None:
    """With CUDA the candidate keeps the judge's /dev/shm (torch's IPC opens reference counters there
    by name), so the judge makes it the evaluation's own: what a child of it writes there, by a file
    or by POSIX shared memory by name, the judge finds, and the host does not (nor a later judge)."""
    import _posixshmem

    name = f"kag-judge-shm-{os.getpid()}"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the judge
        try:
            os.close(r)
            from kag.core.trust.isolation import private_shm

            done = private_shm([str(tmp_path)])
            child = os.fork()
            if child == 0:  # its candidate (with CUDA, its /dev/shm is kept: it is the judge's)
                Path("/dev/shm", name).write_text("1")
                _posixshmem.shm_open(f"/{name}-seg", os.O_CREAT | os.O_RDWR, 0o600)
                os._exit(0)
            os.waitpid(child, 0)
            seen = {"file": os.path.exists(f"/dev/shm/{name}"), "segment": os.path.exists(f"/dev/shm/{name}-seg")}
            os.write(w, json.dumps({"done": done, **seen}).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        found = json.loads(fh.read())
    os.waitpid(pid, 0)
    try:
        assert found == {"done": "private /dev/shm (the evaluation's own)", "file": True, "segment": True}, found
        assert not os.path.exists(f"/dev/shm/{name}") and not os.path.exists(f"/dev/shm/{name}-seg")
    finally:
        for left in (f"/dev/shm/{name}", f"/dev/shm/{name}-seg"):
            if os.path.exists(left):
                os.unlink(left)


@NEEDS_ROOT
def test_a_run_folder_under_dev_shm_stays_the_hosts() -> None:
    """A TMPDIR or lock folder under /dev/shm is shared by every judge (the GPU locks would live
    there): the judge's own /dev/shm binds it back in, so another judge's locks are still seen."""
    kept = Path("/dev/shm", f"kag-kept-{os.getpid()}")
    kept.mkdir()
    (kept / "lock").write_text("held")
    try:
        def probe(out: dict) -> None:
            from kag.core.trust.isolation import private_shm

            out.update(done=private_shm([str(kept)]), lock=(kept / "lock").read_text(),
                       others=sorted(os.listdir("/dev/shm")))

        found = in_forked_child(probe, {})
        assert found["done"].startswith("private") and found["lock"] == "held", found
        assert found["others"] == [kept.name], found
    finally:
        import shutil

        shutil.rmtree(kept)


@NEEDS_ROOT
def test_the_candidate_cannot_connect_to_the_hosts_unix_sockets(plan: CandidatePlan, tmp_path: Path) -> None:
    """A solution's code is the candidate: a Unix socket is reachable from any process that can
    resolve its path (Landlock does not govern connect() on it), and a Ray node's object store
    (/tmp/ray/...) or Docker's (/run/docker.sock) would give it code outside every sandbox. In its
    own mount namespace it sees empty /tmp and /run, but still its own folder and /dev/shm."""
    import socket

    servers, paths = [], [tmp_path / "host.sock"]
    run_sock = Path("/run") / f"kag-cand-test-{os.getpid()}.sock"
    paths.append(run_sock)
    for path in paths:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen(1)
        servers.append(server)

    def attack(_: int) -> dict:
        def connect(path: Path) -> None:
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(path))

        out = {str(p): tries(lambda p=p: connect(p)) for p in paths}
        out["own"] = tries(lambda: Path(plan.tmp_dir, "x").write_text("1"))
        shm = Path("/dev/shm", f"kag-cand-probe-{plan.tmp_dir.rsplit('-', 1)[-1]}")
        out["shm"] = tries(lambda: shm.write_text("1"))
        shm.unlink(missing_ok=True)
        return out

    try:
        found = in_confined_child(plan, attack, seccomp=False)
    finally:
        for server in servers:
            server.close()
        run_sock.unlink(missing_ok=True)
    assert found.pop("own") == "ALLOWED" and found.pop("shm") == "ALLOWED", found
    assert all(v.startswith("denied") for v in found.values()), found
