"""Not file-keyed, but passes both filters: /proc/sys/fs/file-nr (global count of open struct files)."""
import sys, random, time, os
sys.path.insert(0, "/tmp/futexattack")
from harness import *

def sender(arg):
    t0, slot, bits = arg
    for i, b in enumerate(bits):
        wait_until(t0 + i * slot + slot * 0.1)
        if b:
            fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(400)]
            wait_until(t0 + i * slot + slot * 0.8)
            for fd in fds:
                os.close(fd)
    return {}

def receiver(arg):
    t0, slot, n = arg
    vals = []
    for i in range(n):
        wait_until(t0 + i * slot + slot * 0.5)
        vals.append(int(open("/proc/sys/fs/file-nr").read().split()[0]))
    base = sorted(vals)[0]
    return {"vals": vals, "got": [1 if v - base > 200 else 0 for v in vals]}

if __name__ == "__main__":
    random.seed(2)
    bits = [random.randint(0, 1) for _ in range(16)]
    for al in (True, False):
        s, r = run_pair(sender, receiver, al, bits, slot=0.2)
        got = r["res"]["got"]
        print(r["filter"], f"{sum(x == y for x, y in zip(bits, got))}/16", bits, got)
