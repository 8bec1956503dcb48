"""Every futex op, with and without FUTEX_PRIVATE_FLAG, plus futex2, x32, int 0x80, high op bits."""
import ctypes, sys, json
sys.path.insert(0, "/tmp/futexattack")
from harness import *

def attack(_):
    a = map_lib()
    word = ctypes.c_uint32.from_address(a).value
    a2 = a + 64
    out = {}
    for op in range(14):
        for priv in (0, 128):
            val = (word + 1) & 0xffffffff  # mismatch: a wait returns EAGAIN without blocking
            r = FX.raw_futex(202, a, op | priv, val, 20_000_000, a2, 0xffffffff if op in (9, 10) else word + 1)
            out[f"op{op}{'|P' if priv else ''}"] = en(r)
    # upper bits of op
    out["op=0x80000000|WAKE"] = en(FX.raw_futex(202, a, 0x80000000 | 1, 1, 0, 0, 0))
    out["op=0xffffffff00000001"] = en(FX.raw_futex(202, a, -0x100000000 + 1, 1, 0, 0, 0))
    out["op=0xffffffff00000081"] = en(FX.raw_futex(202, a, -0x100000000 + 0x81, 1, 0, 0, 0))
    out["op=0x100000081(WAKE|P|hi)"] = en(FX.raw_futex(202, a, 0x100000081, 1, 0, 0, 0))
    # futex2: futex_wake(uaddr, mask, nr, flags) flags: FUTEX2_SIZE_U32=2, PRIVATE=128
    for fl in (2, 2 | 128):
        out[f"futex_wake454 fl={fl}"] = en(FX.raw6(454, a, 0xffffffff, 1, fl, 0, 0))
        out[f"futex_wait455 fl={fl}"] = en(FX.raw6(455, a, word + 1, 0xffffffff, fl, 0, 1))
    # futex_requeue(waiters, flags, nr_wake, nr_requeue); waiters[2] of {val,uaddr,flags,res}
    wv = (ctypes.c_uint64 * 8)(0, a, 2, 0, 0, a2, 2, 0)
    for fl in (0, 128):
        out[f"futex_requeue456 fl={fl}"] = en(FX.raw6(456, ctypes.addressof(wv), fl, 1, 1, 0, 0))
    wv1 = (ctypes.c_uint64 * 4)(word + 1, a, 2, 0)
    out["futex_waitv449"] = en(FX.raw6(449, ctypes.addressof(wv1), 1, 0, 0, 1, 0))
    return out

def attack80(_):
    out = {}
    a = map_lib()
    out["x32 futex WAKE"] = en(FX.raw_futex(0x40000000 | 202, a, 1, 1, 0, 0, 0))
    return out

def attack80b(_):
    out = {}
    lo = map_lib(low=True)
    out["lo map addr<4G"] = lo < (1 << 32)
    out["int80 futex WAKE(shared)"] = en(FX.int80(240, lo, 1, 1, 0, 0, 0))
    out["int80 futex WAIT(shared)"] = en(FX.int80(240, lo, 0, ctypes.c_uint32.from_address(lo).value + 1, 0, 0, 0))
    out["int80 getpid(20)"] = en(FX.int80(20, 0, 0, 0, 0, 0, 0))
    return out

if __name__ == "__main__":
    import os
    ref = run_one(attack, True, seccomp=False)
    res = {"no filter": ref["res"]}
    res["nofilter x32"] = run_one(attack80, True, seccomp=False)["res"]
    res["nofilter int80"] = run_one(attack80b, True, seccomp=False)["res"]
    for al in (True, False):
        r = run_one(attack, al)
        res[r["filter"]] = r["res"]
        print(al, r.get("applied"), file=sys.stderr)
    keys = list(ref["res"])
    names = list(res)
    print(f"{'call':32}" + "".join(f"{n[:28]:>30}" for n in names))
    for al in (True, False):
        r = run_one(attack80, al)
        res[("allow" if al else "deny")+" x32"] = r.get("res", r)
        r = run_one(attack80b, al)
        res[("allow" if al else "deny")+" int80"] = r.get("res", r)
    for k in keys:
        print(f"{k:32}" + "".join(f"{str(res[n].get(k)):>30}" for n in names))
    for n in names:
        if "x32" in n or "int80" in n:
            print(n, res[n])
