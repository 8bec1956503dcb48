"""Route 1: forced writes through /proc/self/mem, /proc/<pid>/mem, /proc/self/task/<tid>/mem (own
and another thread's), /proc/thread-self/mem, via pwrite and pwritev, and /proc/self/mem as the
destination of sendfile, copy_file_range and splice. Run: python r01_procmem.py"""
import os, threading
from harness import run_route, en

def attack(t):
    stop = threading.Event()
    th = threading.Thread(target=stop.wait); th.start()
    other = [x for x in os.listdir("/proc/self/task") if int(x) != threading.get_native_id()][0]
    paths = ["/proc/self/mem", f"/proc/{os.getpid()}/mem", f"/proc/self/task/{threading.get_native_id()}/mem",
             f"/proc/self/task/{other}/mem", f"/proc/thread-self/mem"]
    out = []
    for p in paths:
        try:
            fd = os.open(p, os.O_RDWR)
        except OSError as e:
            out.append(f"{p.split('/')[-2]}:open {en(e.errno)}"); continue
        try:
            n = os.pwrite(fd, t.payload, t.dst); out.append(f"{p.split('/')[-2]}:wrote {n}")
        except OSError as e:
            out.append(f"{p.split('/')[-2]}:{en(e.errno)}")
        try:
            n = os.pwritev(fd, [t.payload[:64]], t.dst + 64); out.append(f"v:{n}")
        except OSError as e:
            out.append(f"v:{en(e.errno)}")
        os.close(fd)
    # the same file written by the kernel on our behalf: sendfile, copy_file_range, splice from a pipe
    src = os.open(t.payload_file, os.O_RDONLY)
    mem = os.open("/proc/self/mem", os.O_RDWR)
    for tag, fn in (("sendfile", lambda: (os.lseek(mem, t.dst, 0), os.sendfile(mem, src, 0, 64))[1]),
                    ("copy_file_range", lambda: os.copy_file_range(src, mem, 64, 0, t.dst)),
                    ("splice", lambda: splice_into(src, mem, t.dst))):
        try:
            out.append(f"{tag}:wrote {fn()}")
        except OSError as e:
            out.append(f"{tag}:{en(e.errno)}")
    os.close(src); os.close(mem)
    stop.set(); th.join()
    return " ".join(out)

def splice_into(src, mem, off):
    r, w = os.pipe()
    os.write(w, b"EVIL-GPU-CODE!!!" * 4)
    os.lseek(mem, off, 0)
    try:
        return os.splice(r, mem, 64)
    finally:
        os.close(r); os.close(w)

if __name__ == "__main__":
    run_route("r01_procmem", attack)
