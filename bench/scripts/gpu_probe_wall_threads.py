"""Why the fatbin wall held in a bare process and not in kag's candidate, and what the profiler
records of a kernel launched by a thread of the solution's own (on one GPU).

1. The wall in fresh processes, one step added at a time towards what the candidate's ``prepare``
   does (preload, a profiler session before the wall, a session after it, torch._dynamo's import),
   then torch.relu: "ran" means the wall did not hold. The CUDA module loading mode is printed.
2. A profiler session like the candidate's observer (CPU + CUDA, all threads): a kernel launched
   inside a range on the calling thread, and one launched by a Python thread with no range open;
   for each kernel, the thread and link of the event the observer takes as its launch, and the
   threads of the ranges.
3. Two corpus cases through the evaluator (static guards off): the confinement layers the judge
   reports and the verdict.

    python bench/scripts/gpu_probe_wall_threads.py      # writes wall_threads.json to $OUT when set
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

STEPS = {
    "bare": ["init", "preload", "wall", "relu"],
    "profiler_before": ["init", "preload", "prof_warm", "wall", "relu"],
    "profiler_after": ["init", "preload", "wall", "prof_on", "relu"],
    "profiler_both": ["init", "preload", "prof_warm", "wall", "prof_on", "relu"],
    "dynamo": ["init", "preload", "prof_warm", "wall", "dynamo", "relu"],
    "lazy_mode_eager": ["init", "preload", "wall", "relu"],  # with CUDA_MODULE_LOADING=EAGER
}

CHILD = r'''
import ctypes, json, os, sys
import torch
from kag.core.trust import fatbin_wall
steps = sys.argv[1].split(",")
out, prof = {}, None
def mode():
    try:
        cu = ctypes.CDLL("libcuda.so.1"); m = ctypes.c_int(0)
        return {"rc": cu.cuModuleGetLoadingMode(ctypes.byref(m)), "mode": {1: "EAGER", 2: "LAZY"}.get(m.value, m.value)}
    except Exception as exc:
        return str(exc)
for s in steps:
    try:
        if s == "init":
            torch.cuda.init(); torch.empty(1, device="cuda"); out["env"] = os.environ.get("CUDA_MODULE_LOADING")
            out["loading"] = mode()
        elif s == "preload":
            fatbin_wall.preload("cuda")
        elif s == "prof_warm":
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
                torch.ones(1, device="cuda").fill_(2.0)
            torch.cuda.synchronize()
        elif s == "prof_on":
            from kag.core.eval.candidate.observe import CallObserver
            prof = CallObserver("cuda", kernels=True); prof.start()
        elif s == "wall":
            out["walled"] = fatbin_wall.raise_wall()
        elif s == "dynamo":
            import torch._dynamo
        elif s == "relu":
            x = torch.randn(1024, device="cuda"); y = torch.relu(x); torch.cuda.synchronize()
            out["relu"] = "ran"
    except Exception as exc:
        out[s] = f"{type(exc).__name__}: {str(exc)[:160]}"
print("RESULT " + json.dumps(out))
'''

THREADS = r'''
import json, threading
import torch
from kag.core.eval.candidate.observe import CallObserver
from kag.core.eval.candidate.observations import HARNESS_RANGES
from kag.core.eval.candidate.profiler_events import raw_events, launches
x = torch.randn(1 << 20, device="cuda"); torch.relu(x); torch.sigmoid(x); torch.cuda.synchronize()
obs = CallObserver("cuda", kernels=True); obs.start()
with obs.forward_range():
    torch.relu(x)
t = threading.Thread(target=lambda: torch.sigmoid(x)); t.start(); t.join()
torch.cuda.synchronize()
prof = obs._prof
prof.__exit__(None, None, None)
events = raw_events(prof)
launch_of = launches(events)
marks = [e for e in events if e.name in HARNESS_RANGES and not e.cuda]
rows = {"marks": [(e.name, e.thread) for e in marks], "kernels": []}
for e in events:
    if e.cuda and not e.annotation and e.name not in HARNESS_RANGES:
        l = launch_of(e)
        rows["kernels"].append({"kernel": e.name[:60], "launch": None if l is None else
                                {"name": l.name, "thread": l.thread, "linked": l.linked}})
rows["cpu_threads"] = sorted({e.thread for e in events if not e.cuda})
rows["runtime"] = [(e.name, e.thread, e.linked) for e in events if not e.cuda and "Launch" in e.name][:8]
print("RESULT " + json.dumps(rows))
'''


def child(code: str, arg: str = "", env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"rc": proc.returncode, "stderr": proc.stderr[-800:]}


def corpus(names: list[str]) -> list[dict]:
    sys.path.insert(0, os.getcwd())
    from tests.adversarial.cases import cases
    from tests.adversarial.conftest import guard_plugins
    from tests.adversarial.runner import describe, run_case

    rows = []
    for case in cases("cuda"):
        if case.name in names:
            result = run_case(case, guard_plugins(), do_timing=True, static_guards=False)
            rows.append({"case": case.id, "got": describe(result, case)[:300],
                         "confinement": result.metadata.get("confinement")})
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    report: dict = {"wall": {}}
    for name, steps in STEPS.items():
        env = {"CUDA_MODULE_LOADING": "EAGER"} if name == "lazy_mode_eager" else None
        report["wall"][name] = got = child(CHILD, ",".join(steps), env)
        print(name, json.dumps(got)[:400], flush=True)
    report["threads"] = child(THREADS)
    print("threads", json.dumps(report["threads"])[:2000], flush=True)
    report["corpus"] = corpus(["harness_patch", "aten_dlsym", "overlap_threads"])
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "wall_threads.json"), "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
