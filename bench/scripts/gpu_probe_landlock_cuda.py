"""Which Landlock rules CUDA's initialisation needs (device probe): for each variant, a fresh
interpreter applies the candidate's policy plus the variant's extra rules, then starts CUDA.
Prints one line per variant. Usage: python3 bench/scripts/gpu_probe_landlock_cuda.py"""
from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = {
    "candidate policy": {},
    "+ read /proc": {"read": ["/proc"]},
    "+ write /proc": {"write": ["/proc"]},
    "+ read /proc/devices,/proc/modules": {"read": ["/proc/devices", "/proc/modules", "/proc/cmdline"]},
    "+ write /proc/driver": {"write": ["/proc/driver"]},
    "+ read / (everything)": {"read": ["/"]},
    "+ write /dev": {"devices": ["/dev"]},
}


def child(extra: dict) -> None:
    sys.path.insert(0, REPO)
    from kag.core.trust import confine
    from kag.core.trust.isolation import candidate_plan

    plan = candidate_plan(cuda=True)
    policy = confine.LandlockPolicy(read=plan.read_paths + tuple(extra.get("read", ())),
                                    write=(plan.tmp_dir, "/dev/shm", "/proc/self", *extra.get("write", ())),
                                    devices=tuple(confine.device_paths(True)) + tuple(extra.get("devices", ())))
    confine.apply_landlock(policy)
    import torch

    try:
        torch.cuda.init()
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        print(json.dumps({"ok": True}))
    except Exception as exc:  # noqa: BLE001
        print(json.dumps({"ok": False, "error": str(exc)[:160]}))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        child(json.loads(sys.argv[1]))
        sys.exit(0)
    for name, extra in VARIANTS.items():
        out = subprocess.run([sys.executable, __file__, json.dumps(extra)], capture_output=True, text=True, timeout=120)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        print(f"{name:40s} {line[-1] if line else out.stderr[-300:]}", flush=True)
