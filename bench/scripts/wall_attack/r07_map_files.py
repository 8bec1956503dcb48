"""Route 7: get a file descriptor for the covering memfd again (/proc/self/map_files/<range>, any
memfd left in /proc/self/fd) and write, punch a hole, fallocate, truncate, add/read seals, map it
shared writable. Also run unconfined as root (with capabilities) to show the route itself.
Run: python r07_map_files.py"""
import ctypes, fcntl, mmap, os
from harness import run_route, en

def use_fd(t, fd, out):
    libc = t.libc
    try:
        out.append(f"seals:{fcntl.fcntl(fd, 1034):#x}")  # F_GET_SEALS
    except OSError as e:
        out.append(f"seals:{en(e.errno)}")
    for tag, fn in (("falloc", lambda: libc.fallocate(fd, 0, ctypes.c_long(0), ctypes.c_long(t.size)) or 0),
                    ("punch", lambda: libc.fallocate(fd, 3, ctypes.c_long(2 * t.page), ctypes.c_long(t.page)) or 0),
                    ("ftruncate-grow", lambda: os.ftruncate(fd, t.size + t.page)),
                    ("ftruncate-back", lambda: os.ftruncate(fd, t.size)),
                    ("mmap-shared-RW", lambda: mmap.mmap(fd, t.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)),
                    ("pwrite", lambda: os.pwrite(fd, t.payload, t.page)),
                    ("add_seals", lambda: fcntl.fcntl(fd, 1033, 0x1))):
        ctypes.set_errno(0)
        try:
            r = fn()
            if tag in ("punch", "falloc") and r:
                out.append(f"{tag}:{en(ctypes.get_errno())}"); continue
            if tag == "mmap-shared-RW":
                r[t.page:2 * t.page] = t.payload; r.close()
            out.append(f"{tag}:ok")
        except OSError as e:
            out.append(f"{tag}:{en(e.errno)}")

def attack(t):
    out = []
    name = f"/proc/self/map_files/{t.addr:x}-{t.addr + t.size:x}"
    try:
        out.append(f"list:{len(os.listdir('/proc/self/map_files'))}")
    except OSError as e:
        out.append(f"list:{en(e.errno)}")
    try:
        out.append(f"readlink:{os.readlink(name)[:20]}")
    except OSError as e:
        out.append(f"readlink:{en(e.errno)}")
    for flags, tag in ((os.O_RDWR, "open-rw"), (os.O_RDONLY, "open-ro"), (os.O_PATH, "open-path")):
        try:
            fd = os.open(name, flags)
            out.append(f"{tag}:ok")
            if flags != os.O_PATH:
                use_fd(t, fd, out)
                os.close(fd)
                break
            os.close(fd)
        except OSError as e:
            out.append(f"{tag}:{en(e.errno)}")
    memfds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "memfd:kag-wall" in os.readlink(f"/proc/self/fd/{fd}"):
                memfds.append(fd)
        except OSError:
            pass
    out.append(f"memfd-in-fd-table:{memfds or 'none'}")
    return " ".join(out)

if __name__ == "__main__":
    run_route("r07_map_files", attack, confined=(True, False))
