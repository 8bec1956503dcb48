"""Route 3: mprotect / pkey_mprotect to read-write (then a plain store of the chosen bytes), to
read-exec and to read (the PROT_NONE wall). Run: python r03_mprotect.py"""
import ctypes
from harness import run_route, en, sys_call

def attack(t):
    libc, out = t.libc, []
    for name, prot in (("RW", 3), ("RWX", 7), ("RX", 5), ("R", 1)):
        ctypes.set_errno(0)
        r = libc.mprotect(t.dst, t.page, prot)
        out.append(f"mprotect {name}:{en(ctypes.get_errno()) if r else 'ok'}")
    r, e = sys_call(libc, 329, ctypes.c_void_p(t.dst), t.page, 3, -1)  # pkey_mprotect(RW, pkey -1)
    out.append(f"pkey_mprotect RW:{en(e)}")
    key, e = sys_call(libc, 330, 0, 0)  # pkey_alloc
    if key >= 0:
        r, e = sys_call(libc, 329, ctypes.c_void_p(t.dst), t.page, 3, key)
        out.append(f"pkey_mprotect RW key{key}:{en(e)}")
    else:
        out.append(f"pkey_alloc:{en(e)}")
    if t.is_writable_now():
        ctypes.memmove(t.dst, t.payload, t.page)
        out.append("stored")
    return " ".join(out)

if __name__ == "__main__":
    run_route("r03_mprotect", attack)
