"""Route 16: the real wall (raise_wall, sealed) over a gcc-built library with a 3-page .nv_fatbin
of 0x5A (as tests/core/trust/test_fatbin_wall.py builds it), the library file unreadable under
Landlock, then: (a) the corpus attack (grow the library's neighbouring file mapping in place over
the wall: tests/adversarial/cases/wall_mremap_python), (b) move+grow the neighbouring file mapping
ELSEWHERE (mremap MAYMOVE: the GPU bytes come back from the page cache at a new address, the
covered pages untouched), (c) /proc/self/map_files of the library, (d) open the file, (e) write
0x5A bytes back over the wall through /proc/self/mem, (f) MAP_FIXED the page cache back over the wall
from the neighbour (mremap MAYMOVE|FIXED). Run: python r16_real_library.py"""
import ctypes, errno, json, os, subprocess, sys
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import en, make_libc, sys_call
from kag.core.trust import confine, fatbin_wall, seccomp_allow
from kag.core.trust.isolation import CandidatePlan

SRC = r"""
#define PAGE 4096
__attribute__((section(".nv_fatbin"), used, aligned(PAGE)))
const unsigned char gpu_code[3 * PAGE] = {%s};
unsigned char code_byte(int i) { return ((volatile const unsigned char*)gpu_code)[i]; }
"""

def build_lib():
    lib = os.path.join(HERE, "libfake_gpu.so")
    if not os.path.exists(lib):
        src = os.path.join(HERE, "fake_gpu.c")
        open(src, "w").write(SRC % ", ".join(["0x5A"] * (3 * 4096)))
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", lib, src], check=True)
    return lib

def vmas():
    out = []
    for line in open("/proc/self/maps"):
        p = line.split(None, 5)
        a, b = (int(x, 16) for x in p[0].split("-"))
        out.append((a, b, int(p[2], 16), p[1], p[5].strip() if len(p) > 5 else ""))
    return out

def child(lib, sections, filt, sealed, src, w):
    res = {"filter": filt, "sealed-asked": sealed}
    try:
        fake = ctypes.CDLL(lib); fake.code_byte.restype = ctypes.c_ubyte
        res["before"] = hex(fake.code_byte(4096))
        walled = fatbin_wall.raise_wall(False, False, sections=sections, sealed=sealed)
        res["walled"] = [n for n in walled if "fake" in n]
        res["sealed"] = fatbin_wall.SEALED.get("libfake_gpu.so")
        plan = CandidatePlan(tmp_dir=os.path.join(HERE, "tmp"), read_paths=tuple(confine.system_read_paths()) + (HERE,),
                             unreadable=(lib,), cuda=False, namespaces=False, seccomp=False)
        plan.apply_in_child()
        if filt == "allow":
            seccomp_allow.apply_allow_list(own_pid=os.getpid())
        elif filt == "deny":
            confine.apply_seccomp(own_pid=os.getpid(), allow_list=False)
        res["after-wall"] = hex(fake.code_byte(4096))
        libc = make_libc(); out = []
        maps = vmas()
        mine = [v for v in maps if v[4] == lib]
        wall = [v for v in maps if "kag-wall" in v[4]]
        lo, hi = wall[0][0], wall[-1][1]
        prev = [v for v in mine if v[1] == lo]
        # (a) the corpus attack
        from importlib.machinery import SourceFileLoader  # noqa
        ns = {}; exec(compile(src.split("class ModelNew")[0].replace("import cuda_extension", "").replace("import torch.nn as nn", "").replace("import torch", ""), "corpus", "exec"), ns)
        import io, contextlib
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            ns["undo_wall"]("libfake_gpu")
        out.append(f"(a)corpus-grow-in-place:{said.getvalue().strip() or 'nothing done'}")
        # (b) move the neighbouring file mapping elsewhere and grow it over the fatbin's file offsets
        if prev:
            a, b, off = prev[0][0], prev[0][1], prev[0][2]
            r, e = sys_call(libc, 25, ctypes.c_void_p(a), b - a, (b - a) + (hi - lo), 1, 0)
            if r > 0:
                got = ctypes.string_at(r + (b - a) + 4096, 16)  # page 1 of the fatbin, read at the new address
                back, e2 = sys_call(libc, 25, ctypes.c_void_p(r), (b - a) + (hi - lo), b - a, 3, ctypes.c_void_p(a))
                out.append(f"(b)move+grow-elsewhere:ok, GPU bytes read back at another address={got[:4].hex()} (moved home:{en(e2)})")
            else:
                out.append(f"(b)move+grow-elsewhere:{en(e)}")
            # (f) MAYMOVE|FIXED a grown copy of the neighbour so that it lands over the wall
            r, e = sys_call(libc, 25, ctypes.c_void_p(a), b - a, (b - a) + (hi - lo), 3, ctypes.c_void_p(a))
            out.append(f"(f)move+grow-FIXED-onto-wall:{en(e) if r < 0 else 'ok'}")
        else:
            out.append("(b)(f) no neighbouring file mapping")
        # (c) map_files (d) open
        try:
            fd = os.open(f"/proc/self/map_files/{mine[0][0]:x}-{mine[0][1]:x}", os.O_RDONLY); out.append("(c)map_files:ok"); os.close(fd)
        except OSError as exc:
            out.append(f"(c)map_files:{en(exc.errno)}")
        try:
            os.close(os.open(lib, os.O_RDONLY)); out.append("(d)open:ok")
        except OSError as exc:
            out.append(f"(d)open:{en(exc.errno)}")
        # (e) /proc/self/mem
        try:
            fd = os.open("/proc/self/mem", os.O_RDWR); os.pwrite(fd, b"\x5a" * 4096, lo + 4096); out.append("(e)procmem:ok")
        except OSError as exc:
            out.append(f"(e)procmem:{en(exc.errno)}")
        res["outcome"] = " ".join(out)
        res["after-attacks"] = hex(fake.code_byte(4096))
    except BaseException as exc:  # noqa
        import traceback; res["error"] = traceback.format_exc()[-1500:]
    os.write(w, json.dumps(res).encode())

def main():
    lib = build_lib()
    real = os.path.realpath(lib)
    sections = {real: list(fatbin_wall.elf_section(real))}
    src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "adversarial", "cases", "wall_mremap_python", "cuda", "model_new.py")).read()
    for sealed, filt in ((True, "none"), (True, "allow"), (True, "deny"), (False, "none"), (False, "allow")):
        r, w = os.pipe(); pid = os.fork()
        if pid == 0:
            os.close(r)
            try: child(lib, sections, filt, sealed, src, w)
            finally: os._exit(0)
        os.close(w); data = os.fdopen(r).read(); os.waitpid(pid, 0)
        row = json.loads(data) if data else {"outcome": "child died"}
        print(json.dumps(row))

if __name__ == "__main__":
    main()
