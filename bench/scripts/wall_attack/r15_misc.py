"""Route 15: the rest: mbind(MPOL_MF_MOVE), msync(MS_INVALIDATE), mlock, prctl(PR_SET_MM_*),
prctl(PR_SET_VMA anon name), KSM (PR_SET_MEMORY_MERGE), process_madvise through a pidfd,
/proc/self/clear_refs, brk, a second mseal. None writes bytes by design; each shows what the
kernel lets through and the bytes are checked afterwards. Run: python r15_misc.py"""
import ctypes, os
from harness import run_route, en, sys_call

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

def attack(t):
    libc, out = t.libc, []
    def s(tag, nr, *a):
        out.append(f"{tag}:{en(sys_call(libc, nr, *a)[1])}")
    s("mbind-move", 237, ctypes.c_void_p(t.addr), t.size, 0, 0, 0, 2)  # MPOL_DEFAULT, MPOL_MF_MOVE
    s("msync-invalidate", 26, ctypes.c_void_p(t.addr), t.size, 2)
    s("mlock", 149, ctypes.c_void_p(t.addr), t.size)
    s("prctl-SET_MM_START_CODE", 157, 35, 1, ctypes.c_void_p(t.dst), 0, 0)
    s("prctl-SET_VMA_ANON_NAME", 157, 0x53564d41, 0, ctypes.c_void_p(t.addr), t.size, ctypes.c_char_p(b"x"))
    s("prctl-SET_MEMORY_MERGE", 157, 67, 1, 0, 0, 0)
    s("madvise-MERGEABLE", 28, ctypes.c_void_p(t.addr), t.size, 12)
    pfd, e = sys_call(libc, 434, os.getpid(), 0)
    if pfd >= 0:
        iov = iovec(t.addr, t.size)
        for name, adv in (("PAGEOUT", 21), ("COLLAPSE", 25), ("DONTNEED", 4)):
            s(f"process_madvise-{name}", 440, pfd, ctypes.c_void_p(ctypes.addressof(iov)), 1, adv, 0)
    else:
        out.append(f"pidfd_open:{en(e)}")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("1")
        out.append("clear_refs:ok")
    except OSError as exc:
        out.append(f"clear_refs:{en(exc.errno)}")
    s("brk-onto", 12, ctypes.c_void_p(t.addr + t.size))
    s("mseal-again", 462, ctypes.c_void_p(t.addr), t.size, 0)
    return " ".join(out)

if __name__ == "__main__":
    run_route("r15_misc", attack)
