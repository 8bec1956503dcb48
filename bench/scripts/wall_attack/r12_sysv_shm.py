"""Route 12: SysV shared memory attached over the target: shmat(SHM_REMAP) (a MAP_FIXED) and
plain shmat at the address, then a store of the chosen bytes. Run: python r12_sysv_shm.py"""
import ctypes
from harness import run_route, en

def attack(t):
    buf = ctypes.create_string_buffer(t.payload, t.page)
    out = [f"shmat-SHM_REMAP:{en(t.routes.shm_over(ctypes.c_void_p(t.dst), buf, ctypes.c_size_t(t.page), ctypes.c_size_t(t.page), 1))}"]
    out.append(f"shmat:{en(t.routes.shm_over(ctypes.c_void_p(t.dst), buf, ctypes.c_size_t(t.page), ctypes.c_size_t(t.page), 0))}")
    return " ".join(out)

if __name__ == "__main__":
    run_route("r12_sysv_shm", attack)
