"""Which confinement of a candidate process keeps CUDA IPC with its judge working (device probe).

Each case runs in a fresh interpreter: a root parent (the judge; non-dumpable when the case says
so) forks a child (the candidate) before any CUDA call, confines it as the case says, then the
child shares a CUDA tensor with the parent and the parent shares one with the child, and the child
tries the judge's /proc/<pid>/mem. Prints one JSON line per case.
Usage: python3 bench/scripts/gpu_probe_ipc_confine.py            (all cases)
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
DEVICE = "cuda" if os.path.exists("/dev/nvidiactl") else "cpu"

CASES = {
    "same_uid": {},
    "judge_nondumpable": {"judge_dumpable": False},
    "other_uid": {"uid": 61234, "judge_dumpable": False},
    "other_uid_dumpable": {"uid": 61234, "child_dumpable": True, "judge_dumpable": False},
    "root_nocaps": {"caps": True, "judge_dumpable": False},
    "landlock_only": {"landlock": True, "judge_dumpable": False},
    "landlock_proc_rw": {"landlock": True, "proc_rw": True},
    "landlock_dev_all": {"landlock": True, "dev_all": True},
    "landlock_root_read": {"landlock": True, "root_read": True, "dev_all": True},
    "seccomp_only": {"seccomp": True},
    "root_nocaps_landlock_seccomp": {"caps": True, "landlock": True, "seccomp": True, "judge_dumpable": False},
    "pidns_nocaps_landlock_seccomp": {"pidns": True, "caps": True, "landlock": True, "seccomp": True,
                                      "judge_dumpable": False},
}


def confine_child(case: dict, tmp: str) -> dict:
    from kag.core.trust import confine as c

    done = []
    if case.get("uid"):
        c.change_uid(case["uid"])
        done.append("uid")
        if case.get("child_dumpable"):
            c.set_dumpable(True)
    if case.get("caps"):
        c.drop_capabilities()
        done.append("caps")
    if case.get("landlock"):
        import torch
        read = ["/usr", "/lib", "/lib64", "/bin", "/etc", "/opt", "/proc", "/sys", sys.prefix, sys.base_prefix,
                os.path.dirname(os.path.dirname(torch.__file__)), REPO, "/usr/local/cuda", "/usr/local/nvidia"]
        devices = ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"] + \
            [os.path.join("/dev", d) for d in os.listdir("/dev") if d.startswith("nvidia")]
        if case.get("dev_all"):
            devices = ["/dev"]
        if case.get("root_read"):
            read = ["/"]
        write = [tmp, "/dev/shm"] + (["/proc"] if case.get("proc_rw") else [])
        c.apply_landlock(c.LandlockPolicy(read=tuple(read), write=tuple(write), devices=tuple(devices)))
        done.append("landlock")
    return {"applied": done}


def child_main(conn, case: dict, tmp: str, parent: int) -> None:
    res: dict = {}
    os.environ["TMPDIR"] = tmp
    import tempfile as _t
    _t.tempdir = None
    try:
        res.update(confine_child(case, tmp))
        import torch
        import torch.multiprocessing  # noqa: F401
        from multiprocessing.reduction import ForkingPickler
        t = torch.arange(8, device=DEVICE, dtype=torch.float32) * 3
        (torch.cuda.synchronize() if DEVICE == 'cuda' else None)
        if case.get("seccomp"):
            from kag.core.trust import confine as c
            c.apply_seccomp(own_pid=os.getpid())
            res["applied"].append("seccomp")
        try:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == 'cuda' else [])) as prof:
                y = torch.relu(t)
                (torch.cuda.synchronize() if DEVICE == 'cuda' else None)
            res["profiler_events"] = sorted({e.name[:40] for e in prof.events()})[:4]
        except Exception as e:  # noqa: BLE001
            res["profiler_error"] = repr(e)[:200]
        conn.send_bytes(bytes(ForkingPickler.dumps(t)))
        try:
            got = pickle.loads(conn.recv_bytes())
            res["judge_to_candidate"] = got.tolist()
        except Exception as e:  # noqa: BLE001
            res["judge_to_candidate"] = "failed: " + repr(e)[:120]
        for what in ("mem", "environ"):
            try:
                with open(f"/proc/{parent}/{what}", "rb") as fh:
                    fh.read(1)
                res[f"judge_{what}"] = "OPENED"
            except Exception as e:  # noqa: BLE001
                res[f"judge_{what}"] = type(e).__name__
        try:
            os.kill(parent, 0)
            res["signal_judge"] = "ALLOWED"
        except Exception as e:  # noqa: BLE001
            res["signal_judge"] = type(e).__name__
        try:
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            res["fork"] = "ALLOWED"
        except Exception as e:  # noqa: BLE001
            res["fork"] = type(e).__name__
    except Exception as e:  # noqa: BLE001
        res["error"] = repr(e)[:300]
        try:
            conn.send_bytes(b"")
        except Exception:  # noqa: BLE001
            pass
    conn.send(res)
    time.sleep(1.0)


def run_case(name: str) -> dict:
    import ctypes
    import multiprocessing as mp

    case = CASES[name]
    tmp = tempfile.mkdtemp()
    os.chmod(tmp, 0o777)
    a, b = mp.Pipe()
    libc = ctypes.CDLL(None, use_errno=True)
    own_ns = None
    if case.get("pidns"):
        own_ns = os.open("/proc/self/ns/pid", os.O_RDONLY)
        if libc.unshare(0x20000000) != 0:  # CLONE_NEWPID
            return {"case": name, "error": f"unshare errno {ctypes.get_errno()}"}
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            child_main(b, case, tmp, parent)
        finally:
            os._exit(0)
    if own_ns is not None:
        libc.setns(own_ns, 0x20000000)
    if case.get("judge_dumpable") is False:
        libc.prctl(4, 0, 0, 0, 0)
    import torch
    import torch.multiprocessing  # noqa: F401
    from multiprocessing.reduction import ForkingPickler
    out: dict = {"case": name}
    data = a.recv_bytes()
    try:
        out["candidate_to_judge"] = pickle.loads(data).tolist() if data else "child sent nothing"
    except Exception as e:  # noqa: BLE001
        out["candidate_to_judge"] = "failed: " + repr(e)[:160]
    p = torch.arange(4, device=DEVICE, dtype=torch.float32) + 100
    (torch.cuda.synchronize() if DEVICE == 'cuda' else None)
    a.send_bytes(bytes(ForkingPickler.dumps(p)))
    out["child"] = a.recv()
    os.waitpid(pid, 0)
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--case"]:
        print(json.dumps(run_case(sys.argv[2])), flush=True)
        sys.exit(0)
    for name in CASES:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", name], capture_output=True,
                              text=True, timeout=120)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        print(line[-1] if line else json.dumps({"case": name, "rc": proc.returncode, "stderr": proc.stderr[-600:]}),
              flush=True)
