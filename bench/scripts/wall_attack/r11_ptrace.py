"""Route 11: ptrace: a forked child seizes this process and PTRACE_POKEDATAs the target; seizing a
thread of its own. Run: python r11_ptrace.py"""
import ctypes, threading
from harness import run_route, en

def attack(t):
    R, out = t.routes, []
    st = ctypes.c_int(0)
    word = int.from_bytes(t.payload[:8], "little")
    e = R.ptrace_poke_from_child(ctypes.c_void_p(t.dst), ctypes.c_long(word), ctypes.byref(st))
    if e == 0:
        out.append("child-poke:ok")
    elif e >= 2000:
        out.append(f"child-poke:POKEDATA {en(e - 2000)}")
    elif e >= 1000:
        out.append(f"child-poke:SEIZE {en(e - 1000)}")
    elif e == -1:
        out.append("child-poke:child gave no answer")
    else:
        out.append(f"child-poke:fork {en(e)}")
    stop = threading.Event(); th = threading.Thread(target=stop.wait); th.start()
    out.append(f"seize-own-thread:{en(R.ptrace_thread(th.native_id))}")
    stop.set(); th.join()
    return " ".join(out)

if __name__ == "__main__":
    run_route("r11_ptrace", attack)
