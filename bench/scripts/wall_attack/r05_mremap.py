"""Route 5: mremap (syscall 25) over or of the target: move a page of chosen bytes onto it
(MAYMOVE|FIXED), move the target away and map afresh, MREMAP_DONTUNMAP, grow the target in place,
shrink it. Run: python r05_mremap.py"""
import ctypes
from harness import run_route, en, sys_call, MAP_FIXED, MAP_PRIVATE, MAP_ANON

MAYMOVE, FIXED, DONTUNMAP = 1, 2, 4

def attack(t):
    libc, out = t.libc, []
    src = libc.mmap(None, t.page, 3, MAP_PRIVATE | MAP_ANON, -1, 0)
    ctypes.memmove(src, t.payload, t.page)
    r, e = sys_call(libc, 25, ctypes.c_void_p(src), t.page, t.page, MAYMOVE | FIXED, ctypes.c_void_p(t.dst))
    out.append(f"move-payload-onto:{en(e)}")
    if r == t.dst:
        return " ".join(out)
    spare = libc.mmap(None, t.page, 3, MAP_PRIVATE | MAP_ANON, -1, 0)
    r, e = sys_call(libc, 25, ctypes.c_void_p(t.dst), t.page, t.page, MAYMOVE | FIXED, ctypes.c_void_p(spare))
    out.append(f"move-target-away:{en(e)}")
    if r == spare:
        got = libc.mmap(t.dst, t.page, 3, MAP_PRIVATE | MAP_ANON | MAP_FIXED, -1, 0)
        if got == t.dst:
            ctypes.memmove(t.dst, t.payload, t.page); out.append("refilled"); return " ".join(out)
    r, e = sys_call(libc, 25, ctypes.c_void_p(t.dst), t.page, t.page, MAYMOVE | DONTUNMAP, 0)
    out.append(f"dontunmap:{en(e)}")
    r, e = sys_call(libc, 25, ctypes.c_void_p(t.addr), t.size, t.size + t.page, 0, 0)
    out.append(f"grow-in-place:{en(e)}")
    r, e = sys_call(libc, 25, ctypes.c_void_p(t.addr), t.size, t.page, 0, 0)
    out.append(f"shrink:{en(e)}")
    return " ".join(out)

if __name__ == "__main__":
    run_route("r05_mremap", attack)
