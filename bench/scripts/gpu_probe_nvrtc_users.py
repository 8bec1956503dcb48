"""What in the candidate's own start-up calls NVRTC once it is closed (the NVRTC wall): the steps of the
harness's prepare and of a first observed call, one by one, in a fresh process, with faulthandler
printing where a SIGSEGV lands. ``python bench/scripts/gpu_probe_nvrtc_users.py [STEP]``"""

from __future__ import annotations

import faulthandler
import os
import subprocess
import sys

STEPS = ["import dynamo", "dlopen", "seccomp", "profiler", "observer", "ones"]


def run(upto: str) -> None:
    faulthandler.enable()
    import torch

    from kag.core.trust import fatbin_wall, nvrtc_wall

    torch.cuda.init()
    torch.empty(1, device="cuda")
    fatbin_wall.preload("cuda")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.ones(1, device="cuda").fill_(2.0)
    torch.cuda.synchronize()
    fatbin_wall.raise_wall(allow_cudnn=False, sections=fatbin_wall.fatbin_sections(os.environ.get("KAG_CACHE_DIR")))
    print("closed", nvrtc_wall.close_compiler(fatbin_wall.library_scan(os.environ.get("KAG_CACHE_DIR"))["compilers"]),
          flush=True)
    for step in STEPS:
        print("step", step, flush=True)
        if step == "import dynamo":
            import torch._dynamo  # noqa: F401
        elif step == "dlopen":  # the dynamic linker reads every global library's symbol tables
            import ctypes.util

            ctypes.CDLL(ctypes.util.find_library("m"))
        elif step == "seccomp":
            from kag.core.trust.confine import apply_seccomp

            print(apply_seccomp(no_exec=True, no_fork=True, own_pid=os.getpid()), flush=True)
        elif step == "profiler":
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
                torch.ones(1, device="cuda").fill_(3.0)
            torch.cuda.synchronize()
        elif step == "observer":
            from kag.core.eval.candidate.observe import CallObserver

            obs = CallObserver("cuda", kernels=True)
            obs.start()
            torch.ones(4, device="cuda").fill_(1.0)
            torch.cuda.synchronize()
            print("observer ok", flush=True)
        elif step == "ones":
            torch.zeros(16, device="cuda").fill_(1.0)
            torch.cuda.synchronize()
        if step == upto:
            break
    print("all ok", flush=True)
    os._exit(0)  # as the candidate exits: NVRTC's destructors are code, and gone


if __name__ == "__main__":
    if len(sys.argv) > 1:
        run(sys.argv[1])
    else:
        for step in STEPS:
            p = subprocess.run([sys.executable, __file__, step], capture_output=True, text=True, timeout=200)
            print(f"--- up to {step}: rc {p.returncode}")
            print("\n".join((p.stdout + p.stderr).splitlines()[-25:]))
