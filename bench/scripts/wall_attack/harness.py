"""Shared setup for the attack scripts r*.py: in a forked child, a candidate-like confinement
(kag.core.trust.isolation.CandidatePlan.apply_in_child: no capabilities, no_new_privs, Landlock with
/proc/self writable), a 4-page target built one of several ways, optionally the candidate's seccomp
filter, then the route's attack; afterwards the target's bytes are read back through /proc/self/mem
(which also reads PROT_NONE pages) and compared with what was there.

Targets (page 0 holds b"KEPT"*1024, pages 1-3 read as zeros; attacks aim chosen bytes at page 1):
  priv-ro          control: private anonymous read-only mapping (an ordinary read-only page)
  priv-ro+mseal    control: the same, mseal()ed
  memfd-open+mseal control: MAP_SHARED PROT_READ of a memfd WITHOUT F_SEAL_* (fd closed), mseal()ed
  wall-ro          the defence as raise_wall uses it: cover(PROT_READ) + seal()
  wall-none        the defence as nvrtc_wall._blank uses it: cover(PROT_NONE) + seal() (close_compiler seals)
  wall-ro-nomseal  cover(PROT_READ) without seal() (a kernel without mseal; raise_wall(sealed=False))
Filters: none | allow (seccomp_allow.apply_allow_list(own_pid)) | deny (confine.apply_seccomp(allow_list=False)).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import mmap
import os
import sys
import traceback

from kag.core.trust import confine, fatbin_wall, seccomp_allow
from kag.core.trust.isolation import CandidatePlan

HERE = os.path.dirname(os.path.abspath(__file__))
# one JSON of rows per route: $KAG_BENCH_OUT, else bench/out/wall_attack/ (git ignores bench/out/)
RESULTS = os.environ.get("KAG_BENCH_OUT") or os.path.join(HERE, "..", "..", "out", "wall_attack")
PAGE = mmap.PAGESIZE
NPAGES = 4
SIZE = NPAGES * PAGE
KEPT = b"KEPT" * (PAGE // 4)
PAYLOAD = b"EVIL-GPU-CODE!!!" * (PAGE // 16)
EXPECTED = KEPT + bytes(SIZE - PAGE)
TARGETS = ("priv-ro", "priv-ro+mseal", "memfd-open+mseal", "wall-ro", "wall-none", "wall-ro-nomseal")
FILTERS = ("none", "allow", "deny")
PROT_NONE, PROT_READ, PROT_WRITE, PROT_EXEC = 0, 1, 2, 4
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANON = 1, 2, 0x10, 0x20


def en(code: int) -> str:
    return errno.errorcode.get(code, str(code)) if code else "ok"


def make_libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.syscall.restype = ctypes.c_long
    return libc


def sys_call(libc, nr: int, *args) -> tuple[int, int]:
    """(result, errno) of a raw system call; arguments passed as c_long."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, ctypes._SimpleCData) else ctypes.c_long(a) for a in args])
    return r, (ctypes.get_errno() if r == -1 else 0)


class Target:
    """What an attack gets: the target range, where to put the chosen bytes, helpers."""

    def __init__(self, name: str, filt: str, libc, routes):
        self.name, self.filter, self.libc, self.routes = name, filt, libc, routes
        self.size, self.page, self.payload = SIZE, PAGE, PAYLOAD
        self.addr = 0
        self.dst = 0
        self.payload_file = ""
        self.notes: list[str] = []

    def is_writable_now(self) -> bool:
        for lo, hi, perms, _ in self.maps():
            if lo <= self.dst < hi:
                return "w" in perms
        return False

    def maps(self) -> list[tuple[int, int, str, str]]:
        out = []
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if hi > self.addr and lo < self.addr + self.size:
                    out.append((lo, hi, parts[1], parts[5].strip() if len(parts) > 5 else ""))
        return out


def build(t: Target) -> None:
    libc = t.libc
    base = libc.mmap(None, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0)
    assert base and base != ctypes.c_void_p(-1).value
    t.addr, t.dst = base, base + PAGE
    name = t.name
    if name.startswith("priv-ro"):
        ctypes.memmove(base, KEPT, PAGE)
        assert libc.mprotect(base, SIZE, PROT_READ) == 0
        if name.endswith("mseal"):
            assert fatbin_wall.seal(libc, base, SIZE), "mseal failed"
    elif name == "memfd-open+mseal":
        fd = os.memfd_create("kag-wall", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, SIZE)
        os.pwrite(fd, KEPT, 0)
        got = libc.mmap(base, SIZE, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0)
        os.close(fd)
        assert got == base
        assert fatbin_wall.seal(libc, base, SIZE), "mseal failed"
    elif name.startswith("wall-"):
        prot = PROT_NONE if name == "wall-none" else PROT_READ
        fatbin_wall.cover(libc, base, SIZE, prot, {0: KEPT}, "attack test")
        if name != "wall-ro-nomseal":
            assert fatbin_wall.seal(libc, base, SIZE), "mseal failed"
    else:
        raise ValueError(name)


def read_back(t: Target) -> tuple[str, bytes | None]:
    try:
        fd = os.open("/proc/self/mem", os.O_RDONLY)
        try:
            data = os.pread(fd, SIZE, t.addr)
        finally:
            os.close(fd)
    except OSError as exc:
        return f"unreadable ({en(exc.errno)})", None
    if len(data) != SIZE:
        return f"short read ({len(data)})", data
    if PAYLOAD[:8] in data:  # (ptrace pokes 8 bytes)
        return "CHOSEN BYTES WRITTEN", data
    if data != EXPECTED:
        return "changed (not chosen bytes)", data
    return "intact", data


def child(attack, name: str, filt: str, confined: bool, w: int) -> None:
    res: dict = {"target": name, "filter": filt, "confined": confined}
    try:
        routes = ctypes.CDLL(os.path.join(HERE, "libroutes.so"), use_errno=True)
        libc = make_libc()
        tmp = os.path.join(RESULTS, "tmp")  # the candidate's writable folder (made here: it was never committed)
        os.makedirs(tmp, exist_ok=True)
        if confined:
            plan = CandidatePlan(tmp_dir=tmp, read_paths=tuple(confine.system_read_paths()) + (HERE,),
                                 cuda=False, namespaces=False, seccomp=False)
            plan.apply_in_child()
            res["layers"] = plan.applied
        t = Target(name, filt, libc, routes)
        t.payload_file = os.path.join(tmp, f"payload-{os.getpid()}.bin")
        with open(t.payload_file, "wb") as f:
            f.write(PAYLOAD)
        build(t)
        res["before_maps"] = [f"{lo:x}-{hi:x} {p} {n}" for lo, hi, p, n in t.maps()]
        if filt == "allow":
            seccomp_allow.apply_allow_list(own_pid=os.getpid())
        elif filt == "deny":
            confine.apply_seccomp(no_exec=True, no_fork=True, own_pid=os.getpid(), allow_list=False)
        try:
            res["outcome"] = str(attack(t))
        except Exception as exc:  # noqa: BLE001
            res["outcome"] = f"raised {exc!r}"
            res["tb"] = traceback.format_exc()[-800:]
        res["state"], _ = read_back(t)
        res["maps"] = [f"{p} {n or 'anon'}" for lo, hi, p, n in t.maps()]
        try:
            os.unlink(t.payload_file)
        except OSError:
            pass
    except BaseException as exc:  # noqa: BLE001
        res["error"] = repr(exc)
        res["tb"] = traceback.format_exc()[-1500:]
    os.write(w, json.dumps(res).encode())


def run_one(attack, name: str, filt: str, confined: bool = True) -> dict:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            child(attack, name, filt, confined, w)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        return {"target": name, "filter": filt, "confined": confined,
                "outcome": f"child died (signal {sig}, status {status})", "state": "?"}
    return json.loads(data)


def run_route(route: str, attack, targets=TARGETS, filters=FILTERS, confined=(True,)) -> list[dict]:
    rows = []
    for conf in confined:
        for filt in filters:
            for name in targets:
                rows.append(run_one(attack, name, filt, conf))
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"{route}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(f"== {route}")
    for row in rows:
        who = "candidate" if row.get("confined") else "UNCONFINED root"
        line = f"{row['target']:<17} filter={row['filter']:<5} {who:<15} -> {row.get('state', '?'):<26} {row.get('outcome', '')}"
        if "error" in row:
            line += f"  ERROR {row['error']}"
        print(line)
        if "error" in row and os.environ.get("VERBOSE"):
            print(row.get("tb"))
    return rows


if __name__ == "__main__":
    print(__doc__)
