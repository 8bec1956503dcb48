"""Route 4: replace the pages: mmap MAP_FIXED (anonymous RW, the payload file, a memfd_secret),
munmap then mmap, MAP_FIXED_NOREPLACE, a MAP_FIXED range that only overlaps, and cover() itself
re-run by the candidate with its own bytes. Run: python r04_map_fixed.py"""
import ctypes, os
from harness import run_route, en, sys_call, MAP_FIXED, MAP_PRIVATE, MAP_SHARED, MAP_ANON
from kag.core.trust import fatbin_wall

def attack(t):
    libc, out = t.libc, []
    def mm(tag, addr, size, prot, flags, fd=-1):
        ctypes.set_errno(0)
        got = libc.mmap(addr, size, prot, flags, fd, 0)
        ok = got == addr
        out.append(f"{tag}:{'ok' if ok else en(ctypes.get_errno()) if got in (None, ctypes.c_void_p(-1).value) else hex(got)}")
        return ok
    if mm("fixed-anon-RW", t.dst, t.page, 3, MAP_PRIVATE | MAP_ANON | MAP_FIXED):
        ctypes.memmove(t.dst, t.payload, t.page); return " ".join(out)
    fd = os.open(t.payload_file, os.O_RDONLY)
    if mm("fixed-file-RX", t.dst, t.page, 5, MAP_PRIVATE | MAP_FIXED, fd):
        return " ".join(out)
    os.close(fd)
    if mm("fixed-overlap", t.addr - t.page, 2 * t.page, 3, MAP_PRIVATE | MAP_ANON | MAP_FIXED):
        ctypes.memmove(t.dst, t.payload, t.page); return " ".join(out)
    sfd, e = sys_call(libc, 447, 0)  # memfd_secret
    if sfd >= 0:
        os.ftruncate(sfd, t.page)
        if mm("fixed-memfd_secret", t.dst, t.page, 3, MAP_SHARED | MAP_FIXED, sfd):
            ctypes.memmove(t.dst, t.payload, t.page); return " ".join(out)
    else:
        out.append(f"memfd_secret:{en(e)}")
    try:
        fatbin_wall.cover(libc, t.dst, t.page, 5, {0: t.payload}, "candidate")
        out.append("cover():ok"); return " ".join(out)
    except OSError as exc:
        out.append(f"cover():{en(exc.errno)}")
    ctypes.set_errno(0)
    r = libc.munmap(t.dst, t.page)
    out.append(f"munmap:{en(ctypes.get_errno()) if r else 'ok'}")
    if r == 0 and mm("remap-after-munmap", t.dst, t.page, 3, MAP_PRIVATE | MAP_ANON | 0x100000):  # NOREPLACE
        ctypes.memmove(t.dst, t.payload, t.page)
    else:
        mm("fixed-noreplace", t.dst, t.page, 3, MAP_PRIVATE | MAP_ANON | 0x100000)
    return " ".join(out)

if __name__ == "__main__":
    run_route("r04_map_fixed", attack)
