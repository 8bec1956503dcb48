"""flock on a read-only library file both candidates read: faked by the allow-list, real under the deny-list."""
import sys, random, os, fcntl
sys.path.insert(0, "/tmp/futexattack")
from harness import *

def sender(arg):
    t0, slot, bits = arg
    fd = os.open(LIB, os.O_RDONLY)
    for i, b in enumerate(bits):
        wait_until(t0 + i * slot + slot * 0.1)
        if b:
            fcntl.flock(fd, fcntl.LOCK_EX)
            wait_until(t0 + i * slot + slot * 0.8)
            fcntl.flock(fd, fcntl.LOCK_UN)
    return {}

def receiver(arg):
    t0, slot, n = arg
    fd = os.open(LIB, os.O_RDONLY)
    got = []
    for i in range(n):
        wait_until(t0 + i * slot + slot * 0.5)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB); fcntl.flock(fd, fcntl.LOCK_UN); got.append(0)
        except BlockingIOError:
            got.append(1)
    return {"got": got}

if __name__ == "__main__":
    random.seed(3)
    bits = [random.randint(0, 1) for _ in range(16)]
    for al in (True, False):
        s, r = run_pair(sender, receiver, al, bits, slot=0.2)
        got = r["res"]["got"]
        print(r["filter"], f"{sum(x == y for x, y in zip(bits, got))}/16", bits, got)
