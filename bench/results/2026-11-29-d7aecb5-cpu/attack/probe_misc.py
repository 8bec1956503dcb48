import ctypes, sys, os, fcntl, time
sys.path.insert(0, "/tmp/futexattack")
from harness import *

def attack(_):
    out = {}
    # process-shared POSIX semaphore (glibc: futex without FUTEX_PRIVATE_FLAG)
    buf = ctypes.create_string_buffer(64)
    libc.sem_init(buf, 0, 0)
    ts = (ctypes.c_long * 2)(int(time.time()) + 0, 50_000_000)
    ts[0] = int(time.time()); ts[1] = 0
    ts2 = (ctypes.c_long * 2)(int(time.time()) + 1, 0)
    r = libc.sem_timedwait(buf, ts2)
    out["sem_timedwait(pshared=0) a"] = (r, errno.errorcode.get(ctypes.get_errno()))
    libc.sem_init(buf, 0, 0)
    r = libc.sem_timedwait(buf, ts2)
    out["sem_timedwait(pshared=0)"] = (r, errno.errorcode.get(ctypes.get_errno()))
    # fcntl: leases and (6.19) delegations on a read-only shared file
    fd = os.open(LIB, os.O_RDONLY)
    for name, cmd, arg in (("F_SETLEASE RD", 1024, 0), ("F_GETLEASE", 1025, 0), ("F_SETLEASE WR", 1024, 1),
                           ("1039", 1039, 0), ("1040", 1040, 0), ("F_GETLK", 5, None)):
        try:
            if arg is None:
                import struct
                r = fcntl.fcntl(fd, cmd, struct.pack("hhqqi", 1, 0, 0, 0, 0))
                r = struct.unpack("hhqqi", r[:28])
            else:
                r = fcntl.fcntl(fd, cmd, arg)
            out[name] = r
        except OSError as e:
            out[name] = errno.errorcode[e.errno]
    try:
        out["flock EX"] = fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB) or 0
    except OSError as e:
        out["flock EX"] = errno.errorcode[e.errno]
    for p in ("/proc/sys/fs/file-nr", "/proc/meminfo", "/proc/locks", "/proc/sys/kernel/ns_last_pid"):
        try:
            out[p] = open(p).read()[:60]
        except OSError as e:
            out[p] = errno.errorcode[e.errno]
    return out

if __name__ == "__main__":
    for al in (True, False):
        r = run_one(attack, al)
        print(r.get("filter"))
        for k, v in r.get("res", r).items():
            print("   ", k, repr(v))
