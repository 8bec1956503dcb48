"""Fidelity of kag's timing against an independent clock: CUPTI kernel durations (torch.profiler).

For each task (KernelBench level-1/2 models with a CUDA example solution, at their own sizes and
scaled down so eager spans ~20 us to ~10 ms), it asks kag's evaluator for the speed-up over eager,
then, in a separate trusted process of its own (this one), builds the same solution and measures
the GPU kernel time per call of ModelNew and of the eager Model with the profiler (fresh inputs
and an L2 flush before every call, median over the calls). The table compares kag's speed-up with
the ratio of kernel times: the judge's clock includes launch and synchronisation, the profiler's
does not, so they agree for kernels well over the launch overhead and diverge below.

    python bench/fidelity.py [--only NAME,...] [--iters N] [--reference-calibration]

Prints the table last; writes fidelity.json and fidelity.md to $OUT when it is set.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE_CALIBRATION = False  # --reference-calibration
sys.path.insert(0, str(REPO))
SAMPLE = REPO / "examples" / "kernelbench_sample"

# (name, example solution, KernelBench file, {module-level constant: value} to scale it down)
TASKS = [
    ("relu@128x64k", "relu", "level1/19_ReLU.py", {"batch_size": 128, "dim": 65536}),
    ("sigmoid@512x128k", "sigmoid", "level1/21_Sigmoid.py", {"batch_size": 512, "dim": 131072}),
    ("diag_matmul", "diag_matmul", "level1/12_Matmul_with_diagonal_matrices_.py", {}),
    ("gemm_divide_sum_scaling", "gemm_divide_sum_scaling", "level2/14_Gemm_Divide_Sum_Scaling.py", {}),
    ("relu", "relu", "level1/19_ReLU.py", {}),
    ("softmax", "softmax", "level1/23_Softmax.py", {}),
]


def task_code(rel: str, sizes: dict[str, int]) -> str:
    code = (SAMPLE / rel).read_text()
    for name, value in sizes.items():
        code, n = re.subn(rf"^{name}\s*=.*$", f"{name} = {value}", code, flags=re.M)
        assert n == 1, (rel, name)
    return code


def profiler_ms(model, make_inputs, iters: int) -> float:
    """Median GPU kernel time (CUPTI) per call, fresh inputs and an L2 flush before each call."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    flush = torch.empty(2 * 50 << 20, dtype=torch.uint8, device="cuda")
    times = []
    with torch.no_grad():
        for i in range(iters + 3):
            inputs = make_inputs(i)
            flush.zero_()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                out = model(*inputs)
                torch.cuda.synchronize()
            kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            if i >= 3:
                times.append(sum(e.device_time for e in kernels) / 1000.0)
            del out, inputs
    return statistics.median(times)


def measure(name: str, example: str, rel: str, sizes: dict[str, int], iters: int) -> dict:
    from kag.core.eval.evaluate import EvalOptions, evaluate
    from kag.core.plugins import Plugins
    from kag.core.records import Task
    from kag.core.agent.workspace import read_solution

    code = task_code(rel, sizes)
    task = Task(name=name, source="fidelity", code=code, path=str(SAMPLE / rel))
    solution = read_solution(REPO / "examples" / example / "cuda")
    plugins = Plugins()
    t0 = time.perf_counter()
    result = evaluate(task, solution, EvalOptions(backend="cuda", num_timed=100, warmup=10,
                                                  reference_calibration=REFERENCE_CALIBRATION), plugins)
    row = {"task": name, "kernelbench": rel, "sizes": sizes, "eval_s": round(time.perf_counter() - t0, 1),
           "ok": result.ok, "error": (result.error or "")[:200]}
    if not result.ok:
        return row
    t = result.times_ms
    if not t.get("candidate"):  # the calibration took the whole window: no speed-up to compare
        row.update(ok=False, error=f"kag's candidate time is {t.get('candidate')} ms (calibration >= the call's window)",
                   calibration=result.metadata.get("calibration"))
        return row
    row.update(kag_eager_ms=t["eager"], kag_candidate_ms=t["candidate"], kag_speedup=t["eager"] / t["candidate"],
               calibration=result.metadata.get("calibration"), durations_s=result.durations_s)
    # the independent measurement, in a fresh process (one cuda_extension per process)
    import subprocess

    proc = subprocess.run([sys.executable, __file__, "--profile-one", name, "--iters", str(iters)],
                          capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        row.update(ok=False, error=f"profiler run failed: {proc.stderr[-300:]}")
        return row
    row.update(json.loads(lines[-1]))
    row["prof_ratio"] = row["prof_eager_ms"] / row["prof_candidate_ms"]
    row["diff_pct"] = 100.0 * (row["kag_speedup"] / row["prof_ratio"] - 1.0)
    return row


def profile_one(name: str, iters: int) -> dict:
    """In this (fresh) process: build the example, load it, and time Model and ModelNew with CUPTI."""
    import torch

    from kag.core.eval.build import build_solution
    from kag.core.plugins import Plugins
    from kag.core.tasks import load_module
    from kag.core.agent.workspace import read_solution

    _, example, rel, sizes = next(t for t in TASKS if t[0] == name)
    code = task_code(rel, sizes)
    solution = read_solution(REPO / "examples" / example / "cuda")
    plugins = Plugins()
    row: dict = {}
    build_dir = Path(tempfile.mkdtemp(prefix="kag-fidelity-"))
    built = build_solution(solution, plugins.create("backend", "cuda"), build_dir)
    assert built.ok, built.log
    sys.path.insert(0, built.module_dir)
    ns = load_module(code, f"<{name}>")
    sol_dir = Path(tempfile.mkdtemp(prefix="kag-fidelity-sol-"))
    (sol_dir / "model_new.py").write_text(solution.model_new)
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"model_new_{name.replace('@', '_')}", sol_dir / "model_new.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(42)
    init = ns["get_init_inputs"]()
    with torch.device("cuda"):
        ref = ns["Model"](*init).cuda()
        new = module.ModelNew(*init).cuda()
    new.load_state_dict(ref.state_dict(), strict=False)

    def make_inputs(i: int) -> list:
        torch.manual_seed(1000 + i)
        with torch.device("cuda"):
            return [x.cuda() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]

    row["prof_eager_ms"] = profiler_ms(ref, make_inputs, iters)
    row["prof_candidate_ms"] = profiler_ms(new, make_inputs, iters)
    return row


def table(rows: list[dict]) -> str:
    lines = ["| task | eager (kag) ms | candidate (kag) ms | kag speed-up | eager kernels ms | candidate kernels ms "
             "| kernel-time ratio | kag vs profiler |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r.get("ok"):
            lines.append(f"| {r['task']} | failed: {r.get('error', '')[:80]} |  |  |  |  |  |  |")
            continue
        lines.append(f"| {r['task']} | {r['kag_eager_ms']:.4f} | {r['kag_candidate_ms']:.4f} | {r['kag_speedup']:.3f} "
                     f"| {r['prof_eager_ms']:.4f} | {r['prof_candidate_ms']:.4f} | {r['prof_ratio']:.3f} "
                     f"| {r['diff_pct']:+.1f}% |")
    return "\n".join(lines) + "\n"


def prebuild(examples: set[str]) -> None:
    """Compile every example at once (nvcc runs in parallel), so the evaluations and the profiler
    runs after it find their objects in the build cache instead of compiling one by one."""
    from concurrent.futures import ThreadPoolExecutor

    from kag.core.eval.build import build_solution
    from kag.core.plugins import Plugins
    from kag.core.agent.workspace import read_solution

    backend = Plugins().create("backend", "cuda")

    def one(example: str) -> str:
        built = build_solution(read_solution(REPO / "examples" / example / "cuda"), backend,
                               Path(tempfile.mkdtemp(prefix="kag-fidelity-pre-")))
        return f"{example}: {'built' if built.ok else 'FAILED ' + built.log[-200:]}"

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        for line in pool.map(one, sorted(examples)):
            print(line, flush=True)
    print(f"prebuilt {len(examples)} examples in {time.perf_counter() - t0:.1f} s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--profile-one", default="", help=argparse.SUPPRESS)
    parser.add_argument("--reference-calibration", action="store_true",
                        help="calibrate the candidate's path with the task's Model (EvalOptions.reference_calibration)")
    args = parser.parse_args()
    global REFERENCE_CALIBRATION
    REFERENCE_CALIBRATION = args.reference_calibration
    if args.profile_one:
        print(json.dumps(profile_one(args.profile_one, args.iters)))
        return 0
    only = {n for n in args.only.split(",") if n}
    prebuild({example for name, example, _, _ in TASKS if not only or name in only})
    rows = []
    for name, example, rel, sizes in TASKS:
        if only and name not in only:
            continue
        try:
            row = measure(name, example, rel, sizes, args.iters)
        except Exception as exc:  # noqa: BLE001 - a failed row says why; the others still run
            row = {"task": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        rows.append(row)
        print(json.dumps(row, default=str), flush=True)
        write(rows)  # after every row: a run cut short still leaves its table
    print(table(rows))
    return 0


def write(rows: list[dict]) -> None:
    out = os.environ.get("OUT")
    if not out:
        return
    import torch

    device = torch.cuda.get_device_name(0)
    Path(out, "fidelity.json").write_text(json.dumps({"device": device, "rows": rows}, indent=1, default=str))
    Path(out, "fidelity.md").write_text(f"# Timing fidelity on {device}\n\n{table(rows)}")


if __name__ == "__main__":
    sys.exit(main())
