"""Sender (shared_futex=False) wakes through the kernel's own SHARED futex wake at thread exit
(CLONE_CHILD_CLEARTID via set_tid_address, or the robust list's list_op_pending): no futex syscall.
Receiver waits FUTEX_WAIT (shared) on the same word of libtorch_cpu.so."""
import ctypes, sys, time, random
sys.path.insert(0, "/tmp/futexattack")
from harness import *

OFF = 8  # e_ident padding: the word is 0 (the robust-list pending path wakes only on a zero word)

def sender(arg):
    (t0, slot, bits), mode = arg
    a = map_lib() + OFF
    out = []
    for i, b in enumerate(bits):
        wait_until(t0 + i * slot + slot * 0.3)
        if b:
            out.append(FX.exit_wake(a, 1 if mode == "robust" else 0))
    return {"thread creates": out}

def receiver(arg):
    t0, slot, n = arg
    a = map_lib() + OFF
    v = ctypes.c_uint32.from_address(a).value
    got, raw = [], []
    for i in range(n):
        wait_until(t0 + i * slot + slot * 0.05)
        r = FX.raw_futex(202, a, 0, v, int(slot * 0.8 * 1e9), 0, 0)  # FUTEX_WAIT, shared
        raw.append(en(r))
        got.append(1 if r == 0 else 0)
    return {"got": got, "raw": raw}

if __name__ == "__main__":
    random.seed(1)
    bits = [random.randint(0, 1) for _ in range(16)]
    for mode in ("cleartid", "robust"):
        for al in (True, False):
            for rshared in (True, False):
                t0 = time.time() + 3
                hs = launch(sender, al, ((t0, 0.2, bits), mode), shared_futex=False)
                hr = launch(receiver, True, (t0, 0.2, 16), shared_futex=rshared)
                s, r = collect(hs), collect(hr)
                got = r.get("res", {}).get("got")
                ok = sum(int(x == y) for x, y in zip(bits, got)) if got else 0
                print(f"mode={mode} sender[{s.get('filter')}] receiver shared_futex={rshared}: "
                      f"{ok}/16 correct; sent={bits} got={got} raw={r.get('res', r).get('raw') if isinstance(r.get('res'), dict) else r} sres={s.get('res')}")
