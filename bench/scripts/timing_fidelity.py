"""Fidelity and steadiness of kag's timing against an independent clock.

Fidelity: for KernelBench tasks whose eager time spans ~10 us to ~10 ms (level-1/2 models with a
CUDA example solution in examples/, at their own sizes and scaled down), kag's speed-up over eager
(``kag.core.eval.orchestrator.evaluate``) against the ratio of GPU kernel time (CUPTI, through torch.profiler) of
eager and of the solution, measured in a fresh trusted process of this script's (fresh inputs and
an L2 flush before every call, median over the calls). On the CPU backend (``--backend cpu``, the
examples' CPU twins) the independent clock is ``perf_counter`` around each call in such a process.

Steadiness (``--repeat N``): the same solution scored N times, one evaluation after another
(baselines cached after the first, or timed afresh in each with ``--fresh-baselines``): the
coefficient of variation of its speed-up; ``--reference-repeat M`` adds the independent clock's ratio
in M fresh processes, so the spread kag reads can be set beside the spread the kernels really have.
The reference processes run under the judge's heap policy (kag.core.eval.judge.heap), as the baseline
runner and the candidate do; ``--reference-heap glibc`` leaves glibc's own (moving) thresholds.

    python bench/scripts/timing_fidelity.py [--backend cuda|cpu] [--only NAME,...] [--repeat N]
                                            [--compile] [--fresh-baselines] [--reference-repeat M]
                                            [--reference-heap steady|glibc]
                                            [--out DIR]

Runs on any machine with one NVIDIA GPU and CUDA torch (or any CPU with ``--backend cpu``). Prints
the table last; writes fidelity.json / fidelity.md (steadiness.* with --repeat) to --out or $OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SAMPLE = REPO / "examples" / "kernelbench_sample"

# (name, example solution, KernelBench file, {module-level constant: value} to scale it)
TASKS = [
    ("relu@64x64k", "relu", "level1/19_ReLU.py", {"batch_size": 64, "dim": 65536}),
    ("relu@128x64k", "relu", "level1/19_ReLU.py", {"batch_size": 128, "dim": 65536}),
    ("tanh@256x64k", "tanh", "level1/22_Tanh.py", {"batch_size": 256, "dim": 65536}),
    ("diag_matmul", "diag_matmul", "level1/12_Matmul_with_diagonal_matrices_.py", {}),
    ("gemm_divide_sum_scaling", "gemm_divide_sum_scaling", "level2/14_Gemm_Divide_Sum_Scaling.py", {}),
    ("sigmoid@512x128k", "sigmoid", "level1/21_Sigmoid.py", {"batch_size": 512, "dim": 131072}),
    ("softmax@256x64k", "softmax", "level1/23_Softmax.py", {"batch_size": 256, "dim": 65536}),
    ("gelu@1024x128k", "gelu", "level1/26_GELU_.py", {"batch_size": 1024, "dim": 131072}),
    ("log_softmax@256x64k", "log_softmax", "level1/24_LogSoftmax.py", {"batch_size": 256, "dim": 65536}),
    ("max_reduction@32x4096x4095", "max_reduction", "level1/49_Max_reduction_over_a_dimension.py",
     {"batch_size": 32}),
    ("new_gelu", "new_gelu", "level1/88_MinGPTNewGelu.py", {}),
    ("sum_reduction", "sum_reduction", "level1/47_Sum_reduction_over_a_dimension.py", {}),
    ("matrix_scalar", "matrix_scalar", "level1/5_Matrix_scalar_multiplication.py", {}),
]
EXTRA_TASKS = [  # full KernelBench sizes (6.4 GB inputs): only with --only
    ("relu", "relu", "level1/19_ReLU.py", {}),
    ("softmax", "softmax", "level1/23_Softmax.py", {}),
]
CPU_TASKS = ["relu", "softmax", "sum_reduction", "gemm_divide_sum_scaling", "diag_matmul"]


def task_code(rel: str, sizes: dict[str, int]) -> str:
    code = (SAMPLE / rel).read_text()
    for name, value in sizes.items():
        code, n = re.subn(rf"^{name}\s*=.*$", f"{name} = {value}", code, flags=re.M)
        assert n == 1, (rel, name)
    return code


def task_of(name: str, backend: str):
    from kag.core.records import Task

    if backend == "cpu":
        path = REPO / "examples" / name / "cpu" / "model.py"
        return Task(name=name, source="fidelity", code=path.read_text(), path=str(path)), REPO / "examples" / name / "cpu"
    _, example, rel, sizes = next(t for t in TASKS + EXTRA_TASKS if t[0] == name)
    return (Task(name=name, source="fidelity", code=task_code(rel, sizes), path=str(SAMPLE / rel)),
            REPO / "examples" / example / "cuda")


def evaluate_once(name: str, backend: str, cache_dir: str, compile_too: bool) -> dict:
    from kag.core.agent.workspace import read_solution
    from kag.core.eval.orchestrator.evaluate import EvalOptions, evaluate
    from kag.core.plugins import Plugins

    task, sol_dir = task_of(name, backend)
    t0 = time.perf_counter()
    result = evaluate(task, read_solution(sol_dir),
                      EvalOptions(backend=backend, cache_dir=cache_dir,
                                  baselines=("eager", "compile") if compile_too else ("eager",)), Plugins())
    row = {"task": name, "eval_s": round(time.perf_counter() - t0, 1), "ok": result.ok,
           "error": (result.error or "")[:300], "reward": result.reward.value if result.reward else None}
    if result.ok:
        t = result.times_ms
        row.update(kag_eager_ms=t["eager"], kag_candidate_ms=t["candidate"], kag_speedup=t["eager"] / t["candidate"],
                   kag_compile_ms=t.get("compile"), calibration=result.metadata.get("calibration"),
                   notes=result.metadata.get("notes"), baseline_cache=result.metadata.get("baseline_cache"),
                   observed=result.metadata.get("observed"), durations_s=result.durations_s)
    return row


def reference_clock(name: str, backend: str, iters: int) -> dict:
    """In this (fresh) process: build the example, load it, time Model and ModelNew on the
    independent clock (CUPTI kernel time on a GPU, perf_counter on the CPU)."""
    ref, new, make_inputs, device = load_pair(name, backend)
    timer = cupti_ms if device == "cuda" else wall_ms
    return {"ref_eager_ms": timer(ref, make_inputs, iters), "ref_candidate_ms": timer(new, make_inputs, iters)}


def load_pair(name: str, backend: str):
    """In this process: the task's Model and the example's ModelNew (built, loaded, the same
    weights), a ``make_inputs(i)`` of fresh inputs, and the device."""
    import importlib.util

    import torch

    from kag.core.agent.workspace import read_solution
    from kag.core.eval.orchestrator.build import build_solution
    from kag.core.plugins import Plugins
    from kag.core.tasks import load_module

    task, sol_dir = task_of(name, backend)
    solution = read_solution(sol_dir)
    device = "cuda" if backend == "cuda" else "cpu"
    built = build_solution(solution, Plugins().create("backend", backend), Path(tempfile.mkdtemp(prefix="kag-fid-")))
    assert built.ok, built.log
    sys.path.insert(0, built.module_dir)
    ns = load_module(task.code, f"<{name}>")
    sol = Path(tempfile.mkdtemp(prefix="kag-fid-sol-"))
    (sol / "model_new.py").write_text(solution.model_new)
    spec = importlib.util.spec_from_file_location("model_new_fid", sol / "model_new.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(42)
    init = ns["get_init_inputs"]()
    with torch.device(device):
        ref = ns["Model"](*init).to(device)
        new = module.ModelNew(*init).to(device)
    new.load_state_dict(ref.state_dict(), strict=False)

    def make_inputs(i: int) -> list:
        torch.manual_seed(1000 + i)
        with torch.device(device):
            return [x.to(device) if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]

    return ref, new, make_inputs, device


def cupti_ms(model, make_inputs, iters: int) -> float:
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


def wall_ms(model, make_inputs, iters: int) -> float:
    """Median perf_counter time per call on the CPU, fresh inputs before each call."""
    import torch

    times = []
    with torch.no_grad():
        for i in range(iters + 3):
            inputs = make_inputs(i)
            t0 = time.perf_counter()
            out = model(*inputs)
            t1 = time.perf_counter()
            if i >= 3:
                times.append((t1 - t0) * 1000.0)
            del out, inputs
    return statistics.median(times)


def reference_row(name: str, args: argparse.Namespace, cache_dir: str) -> dict:
    """The independent clock's times of eager and of the solution, in a fresh process."""
    proc = subprocess.run([sys.executable, __file__, "--backend", args.backend, "--reference-one", name,
                           "--iters", str(args.iters), "--reference-heap", args.reference_heap],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "KAG_CACHE_DIR": cache_dir})  # the objects already built
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": f"reference clock failed: {proc.stderr[-300:]}"}
    row = json.loads(lines[-1])
    row["ref_ratio"] = row["ref_eager_ms"] / row["ref_candidate_ms"]
    return row


def reference_spread_table(refs: dict[str, list[dict]], clock: str) -> str:
    """Each task's eager and solution times on the independent clock, one fresh process each."""
    lines = [f"| task | processes | eager {clock} ms | candidate {clock} ms | ratio | ratio CV |", "|---|---|---|---|---|---|"]
    for name, rows in refs.items():
        ok = [r for r in rows if "ref_ratio" in r]
        ratios = [r["ref_ratio"] for r in ok]
        cv = statistics.pstdev(ratios) / statistics.mean(ratios) if len(ratios) > 1 else float("nan")
        lines.append(f"| {name} | {len(ok)} of {len(rows)} | {', '.join('%.4f' % r['ref_eager_ms'] for r in ok)} | "
                     f"{', '.join('%.4f' % r['ref_candidate_ms'] for r in ok)} | "
                     f"{', '.join(f'{x:.3f}' for x in ratios)} | {100 * cv:.2f}% |")
    return "\n".join(lines) + "\n"


def fidelity_table(rows: list[dict], clock: str) -> str:
    lines = [f"| task | eager (kag) ms | candidate (kag) ms | calls/window | kag speed-up | eager {clock} ms "
             f"| candidate {clock} ms | {clock} ratio | kag vs {clock} |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r.get("ok") or "ref_ratio" not in r:
            lines.append(f"| {r['task']} | failed: {r.get('error', '')[:120]} | | | | | | | |")
            continue
        cal = r.get("calibration") or {}
        lines.append(f"| {r['task']} | {r['kag_eager_ms']:.4f} | {r['kag_candidate_ms']:.4f} | "
                     f"{cal.get('calls_per_window', '')} | {r['kag_speedup']:.3f} | {r['ref_eager_ms']:.4f} | "
                     f"{r['ref_candidate_ms']:.4f} | {r['ref_ratio']:.3f} | {r['diff_pct']:+.1f}% |")
    return "\n".join(lines) + "\n"


def steadiness_table(groups: dict[str, list[dict]]) -> str:
    lines = ["| task | evaluations | speed-ups vs eager | mean | CV | rewards |", "|---|---|---|---|---|---|"]
    for name, rows in groups.items():
        ups = [r["kag_speedup"] for r in rows if r.get("ok")]
        cv = statistics.pstdev(ups) / statistics.mean(ups) if len(ups) > 1 else float("nan")
        lines.append(f"| {name} | {len(rows)} | {', '.join(f'{u:.3f}' for u in ups)} | "
                     f"{statistics.mean(ups) if ups else float('nan'):.3f} | {100 * cv:.2f}% | "
                     f"{', '.join(str(r.get('reward')) for r in rows)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--only", default="")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=0, help="steadiness: score each task this many times")
    parser.add_argument("--compile", action="store_true", help="time torch.compile too (and report the reward)")
    parser.add_argument("--fresh-baselines", action="store_true",
                        help="steadiness: time the baselines again in every evaluation (no cache)")
    parser.add_argument("--reference-repeat", type=int, default=0,
                        help="steadiness: the independent clock's ratio in this many fresh processes too")
    parser.add_argument("--reference-heap", default="steady", choices=("steady", "glibc"),
                        help="the reference processes' malloc policy: the judge's (default) or glibc's own")
    parser.add_argument("--out", default=os.environ.get("OUT", ""))
    parser.add_argument("--reference-one", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference_one:
        if args.reference_heap == "steady":  # before torch allocates: as the judge does before its forks
            from kag.core.eval.judge.heap import steady_heap

            steady_heap()
        print(json.dumps(reference_clock(args.reference_one, args.backend, args.iters)))
        return 0
    names = [t[0] for t in TASKS + EXTRA_TASKS] if args.backend == "cuda" else CPU_TASKS
    only = [n for n in args.only.split(",") if n]
    extra = {t[0] for t in EXTRA_TASKS} if args.backend == "cuda" else set()
    names = [n for n in names if n in only] if only else [n for n in names if n not in extra]
    cache_dir = tempfile.mkdtemp(prefix="kag-fid-cache-")
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    clock = "CUPTI" if args.backend == "cuda" else "perf_counter"
    if args.repeat:
        groups: dict[str, list[dict]] = {}
        for name in names:
            for k in range(args.repeat):
                row = evaluate_once(name, args.backend, tempfile.mkdtemp(prefix="kag-fid-cache-")
                                    if args.fresh_baselines else cache_dir, args.compile)
                groups.setdefault(name, []).append(row)
                print(json.dumps({k: row.get(k) for k in ("task", "ok", "kag_speedup", "kag_candidate_ms", "reward",
                                                           "eval_s", "error")}), flush=True)
                if out:
                    (out / "steadiness.json").write_text(json.dumps(groups, indent=1, default=str))
                    (out / "steadiness.md").write_text(steadiness_table(groups))
        print(steadiness_table(groups))
        if args.reference_repeat:
            refs = {name: [reference_row(name, args, cache_dir) for _ in range(args.reference_repeat)] for name in names}
            table = reference_spread_table(refs, clock)
            print(table)
            if out:
                (out / "reference_spread.json").write_text(json.dumps(refs, indent=1))
                (out / "reference_spread.md").write_text(table)
        return 0
    rows = []
    for name in names:
        row = evaluate_once(name, args.backend, cache_dir, args.compile)
        if row["ok"]:
            ref = reference_row(name, args, cache_dir)
            if "error" in ref:
                row.update(ok=False, error=ref["error"])
            else:
                row.update(ref)
                row["diff_pct"] = 100.0 * (row["kag_speedup"] / row["ref_ratio"] - 1.0)
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("task", "ok", "kag_speedup", "ref_ratio", "diff_pct", "eval_s",
                                                   "error")}), flush=True)
        if out:
            (out / "fidelity.json").write_text(json.dumps(rows, indent=1, default=str))
            (out / "fidelity.md").write_text(fidelity_table(rows, clock))
    print(fidelity_table(rows, clock))
    return 0


if __name__ == "__main__":
    sys.exit(main())
