"""Fork candidates confined like kag's judge does (own IPC ns per 'judge', own pid/net/mnt ns,
Landlock, caps dropped, seccomp with shared_futex=False)."""
import ctypes, errno, json, os, sys, time, mmap
sys.path.insert(0, "/work/main")
from kag.core.trust import confine
from kag.core.trust.isolation import candidate_plan, fork_in_namespace, private_ipc

LIB = "/work/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"
FX = ctypes.CDLL("/tmp/futexattack/fx.so", use_errno=True)
for f in ("raw_futex", "raw6", "int80"):
    getattr(FX, f).restype = ctypes.c_long
    getattr(FX, f).argtypes = [ctypes.c_long] * 7
FX.exit_wake.argtypes = [ctypes.c_size_t, ctypes.c_int]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]

def en(r):
    return r if r >= 0 else errno.errorcode.get(-r, str(r))

def map_lib(flags=mmap.MAP_SHARED, low=False, path=LIB, off=0):
    fd = os.open(path, os.O_RDONLY)
    a = libc.mmap(None, 1 << 16, mmap.PROT_READ, flags | (0x40 if low else 0), fd, off)
    os.close(fd)
    assert a not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    return a

def launch(attack, allow_list, arg, seccomp=True, shared_futex=False):
    """a 'judge' (own IPC ns) forks one confined candidate running attack(arg); returns (pid, read fd)"""
    r, w = os.pipe()
    judge = os.fork()
    if judge == 0:
        os.close(r)
        try:
            private_ipc()
            plan = candidate_plan(cuda=False)
            confine.set_dumpable(False)
            def child():
              try:
                plan.apply_in_child()
                if seccomp:
                    name = confine.apply_seccomp(own_pid=os.getpid(), allow_list=allow_list, shared_futex=shared_futex)
                else:
                    name = "none"
                try:
                    res = attack(arg)
                except BaseException as e:
                    res = {"error": repr(e)}
                os.write(w, json.dumps({"filter": name, "applied": plan.applied, "res": res}).encode())
              except BaseException as e:
                import traceback
                os.write(w, json.dumps({"error": traceback.format_exc()}).encode())
            pid, _ = fork_in_namespace(child, plan.namespaces)
            os.close(w)
            _, st = os.waitpid(pid, 0); sys.stderr.write(f"candidate status {st:#x}\n")
        finally:
            os._exit(0)
    os.close(w)
    return judge, r

def collect(h):
    judge, r = h
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    os.waitpid(judge, 0)
    return json.loads(data) if data else {"error": "died"}

def run_one(attack, allow_list, arg=None, **kw):
    return collect(launch(attack, allow_list, arg, **kw))

def run_pair(sender, receiver, allow_list, bits, slot=0.15, **kw):
    t0 = time.time() + 3.0
    hs = launch(sender, allow_list, (t0, slot, bits), **kw.get("skw", {}))
    hr = launch(receiver, allow_list, (t0, slot, len(bits)), **kw.get("rkw", {}))
    s, r = collect(hs), collect(hr)
    return s, r

def wait_until(t):
    d = t - time.time()
    if d > 0:
        time.sleep(d)
