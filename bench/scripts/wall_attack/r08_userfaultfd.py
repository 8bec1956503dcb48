"""Route 8: userfaultfd (syscall, then /dev/userfaultfd), UFFD_USER_MODE_ONLY: register the target
(MISSING, and MINOR) and UFFDIO_COPY chosen bytes into page 1, a hole of the covering file that was
never read (for shmem that would put a page into the file itself). Run also unconfined (root).
Run: python r08_userfaultfd.py"""
import ctypes
from harness import run_route, en

STAGES = {1: "open", 2: "api", 3: "register", 4: "copy/continue"}

def attack(t):
    out = []
    for mode, tag in ((0, "missing+copy"), (1, "minor+continue")):
        stage = ctypes.c_int(0)
        buf = ctypes.create_string_buffer(t.payload, t.page)
        e = t.routes.uffd_copy(ctypes.c_void_p(t.addr), ctypes.c_size_t(t.size), ctypes.c_void_p(t.dst), buf,
                               ctypes.c_size_t(t.page), mode, ctypes.byref(stage))
        out.append(f"{tag}:{'ok' if e == 0 else STAGES.get(stage.value, '?') + ' ' + en(e)}")
    return " ".join(out)

if __name__ == "__main__":
    run_route("r08_userfaultfd", attack, confined=(True, False))
