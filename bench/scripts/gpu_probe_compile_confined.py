"""torch.compile's call in a process confined as kag's candidates and baseline runner are, against
the same call unconfined: where a compiled baseline's extra time per call comes from.

    python3 bench/scripts/gpu_probe_compile_confined.py [--task level1/12]

Forks two children (confined by kag.core.trust.isolation.CandidatePlan.apply_in_child, and not),
each compiling the task's Model at its first call under a profiler session as the runner does
(the Python markers off), then timing windows of calls; prints per child the median ms a call, the
CPU time a call takes to return, and cProfile's top functions over 200 calls. Trusted bench code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def child(task: str, confined: bool, wfd: int) -> None:
    out: dict = {"confined": confined}
    try:
        if confined:
            from kag.core.trust import isolation

            plan = isolation.candidate_plan(True)
            plan.apply_in_child()
            out["applied"] = plan.applied
        import torch

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from gpu_probe_compile_spread import load, profile_calls, windows

        _, mod = load(task)
        model = mod.Model(*mod.get_init_inputs()).cuda().eval()
        sets = [[x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()] for _ in range(16)]
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA])
        prof.__enter__()
        torch.autograd.profiler._is_profiler_enabled = False
        torch._C._set_grad_enabled(False)
        compiled = torch.compile(model)
        start = time.perf_counter()
        compiled(*sets[0])
        torch.cuda.synchronize()
        out["first_call_s"] = round(time.perf_counter() - start, 2)
        for label, fn in (("eager", model), ("compile", compiled)):
            windows(fn, sets, 30, 3, True)
            per_call, cpu = windows(fn, sets, 30, 30, True)
            out[label] = {"median_ms": round(statistics.median(per_call) * 1e3, 4),
                          "cpu_ms_a_call": round(statistics.median(cpu) * 1e3, 4)}
        out["cprofile"] = profile_calls(compiled, sets, 12)[-3500:]
        torch.autograd.profiler._is_profiler_enabled = True
        prof.__exit__(None, None, None)
    except BaseException as e:  # noqa: BLE001 - the probe reports whatever stopped it
        out["error"] = f"{type(e).__name__}: {e}"[:600]
    os.write(wfd, json.dumps(out).encode())
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="level1/12")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = parser.parse_args()
    import torch  # noqa: F401  imported before the fork, as the judge has it

    rows = []
    for confined in (False, True):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(args.task, confined, w)
        os.close(w)
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        os.waitpid(pid, 0)
        row = json.loads(data or b"{}")
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "cprofile"}), flush=True)
        print(row.get("cprofile", ""), flush=True)
    Path(args.out, "compile_confined.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
