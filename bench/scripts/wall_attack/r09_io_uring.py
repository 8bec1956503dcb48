"""Route 9: io_uring (raw syscalls): IORING_OP_READ of the payload file into the target,
IORING_OP_WRITE of the payload to /proc/self/mem at the target, and registering the target as a
fixed buffer (pins it for writing). Run also unconfined. Run: python r09_io_uring.py"""
import ctypes, os
from harness import run_route, en

def attack(t):
    out, R = [], t.routes
    res = ctypes.c_int(0)
    fd = os.open(t.payload_file, os.O_RDONLY)
    e = R.uring_rw(0, fd, ctypes.c_void_p(t.dst), t.page, ctypes.c_uint64(0), ctypes.byref(res))
    out.append(f"READ-into:{en(e) if e else 'cqe ' + (en(-res.value) if res.value < 0 else str(res.value))}")
    os.close(fd)
    mem = os.open("/proc/self/mem", os.O_RDWR)
    buf = ctypes.create_string_buffer(t.payload, t.page)
    e = R.uring_rw(1, mem, buf, t.page, ctypes.c_uint64(t.dst), ctypes.byref(res))
    out.append(f"WRITE-procmem:{en(e) if e else 'cqe ' + (en(-res.value) if res.value < 0 else str(res.value))}")
    os.close(mem)
    e = R.uring_fixed(-1, ctypes.c_void_p(t.dst), t.page, ctypes.byref(res))
    out.append(f"register-buffer:{en(e)}")
    return " ".join(out)

if __name__ == "__main__":
    run_route("r09_io_uring", attack, confined=(True, False))
