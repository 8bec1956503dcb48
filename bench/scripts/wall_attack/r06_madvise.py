"""Route 6: every madvise advice on the whole target, then (where any succeeded) whether the
bytes changed. HWPOISON/SOFT_OFFLINE need CAP_SYS_ADMIN. Run: python r06_madvise.py"""
import ctypes
from harness import run_route, en

ADVICE = [("WILLNEED", 3), ("DONTNEED", 4), ("FREE", 8), ("REMOVE", 9), ("DONTFORK", 10), ("DOFORK", 11),
          ("MERGEABLE", 12), ("HUGEPAGE", 14), ("DONTDUMP", 16), ("WIPEONFORK", 18), ("KEEPONFORK", 19),
          ("COLD", 20), ("PAGEOUT", 21), ("POPULATE_READ", 22), ("POPULATE_WRITE", 23), ("DONTNEED_LOCKED", 24),
          ("COLLAPSE", 25), ("GUARD_INSTALL", 102), ("GUARD_REMOVE", 103), ("SOFT_OFFLINE", 101), ("HWPOISON", 100)]

def attack(t):
    out = []
    for name, adv in ADVICE:
        ctypes.set_errno(0)
        r = t.libc.madvise(t.addr, t.size, adv)
        out.append(f"{name}:{en(ctypes.get_errno()) if r else 'ok'}")
    return " ".join(out)

if __name__ == "__main__":
    run_route("r06_madvise", attack)
