"""A launch-bound timing alone and beside 8 builds, with and without the build cores
(fair timing under load: a timing beside builds gets the reward it gets alone).

    python bench/scripts/launch_bound.py --backend cuda --out bench/out/launch_bound.md
    python bench/scripts/launch_bound.py --backend cpu --k 1 --raw-calls 2000      (a smoke run, no GPU)
    python bench/scripts/launch_bound.py --example gemm_divide_sum_scaling --arms alone,builds,alone   (a fast solution)

A launch-bound kernel (ReLU on a 16 x 4096 tensor: a few microseconds of GPU work, so each call's
time is mostly the host launching it) is timed in three arms:

- ``alone``: nothing else runs.
- ``builds``: 8 ``kag build`` of 8 different solutions run at once, each from an empty cache, over
  and over, for the whole arm. Builds use kag's default cores (on a GPU host all but one per GPU).
- ``builds-all-cores``: the same with ``KAG_BUILD_CORES=all`` (builds may use every core: the code
  before c0e0aed).

In each arm two things are timed: raw loops (``--raw-calls`` calls of ``torch.relu``; CUDA events
around each call, and the host's wall time of a call with its synchronisation), then ``--k``
evaluations of the honest ReLU solution with ``kag score`` (its median candidate time, the eager
time, reward, and ``others_cpus``: the CPUs other work kept busy during its timed calls). The
foreground's cache is warmed first (not counted), so an evaluation builds nothing. Prints a markdown
table and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EX = REPO / "examples"
BUILD_SOLUTIONS = ["relu", "sigmoid", "tanh", "gelu", "elu", "softmax", "sum_reduction", "diag_matmul"]

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU on a small tensor: each call is a few microseconds of GPU work (launch-bound)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(SIZE) - 0.5]


def get_init_inputs():
    return []
'''

RAW = r'''
import json, statistics, sys, time, torch
dev = sys.argv[1]; n = int(sys.argv[2])
x = torch.rand(16, 4096, device=dev) - 0.5
for _ in range(200):
    torch.relu(x)
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
sync()
events, walls = [], []
for _ in range(n):
    if dev == "cuda":
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter(); s.record(); torch.relu(x); e.record(); e.synchronize()
        walls.append((time.perf_counter() - t0) * 1e6); events.append(s.elapsed_time(e) * 1e3)
    else:
        t0 = time.perf_counter(); torch.relu(x); walls.append((time.perf_counter() - t0) * 1e6)
q = lambda v, p: sorted(v)[min(len(v) - 1, int(p * len(v)))] if v else None
print(json.dumps({"event_p50_us": q(events, 0.5), "event_p90_us": q(events, 0.9),
                  "wall_p50_us": q(walls, 0.5), "wall_p90_us": q(walls, 0.9), "wall_p99_us": q(walls, 0.99)}))
'''


def env_for(work: Path, cache: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["KAG_CACHE_DIR"] = str(work / cache)
    env.update(extra)
    return env


def kag(*args: str) -> list[str]:
    return [sys.executable, "-m", "kag.cli.main", *args]


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs so far (/proc/stat)."""
    fields = [float(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, sum(fields)


class Builds:
    """``n`` builds at once from empty caches, again and again until stopped (the background load)."""

    def __init__(self, work: Path, backend: str, n: int, extra_env: dict[str, str]) -> None:
        self.work, self.backend, self.n, self.extra = work, backend, n, extra_env
        self.stop_flag = threading.Event()
        self.done, self.failed, self.seconds = 0, 0, []
        self.procs: list[subprocess.Popen] = []
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        rnd = 0
        while not self.stop_flag.is_set():
            rnd += 1
            procs = []
            for i in range(self.n):
                name = BUILD_SOLUTIONS[i % len(BUILD_SOLUTIONS)]
                tag = f"r{rnd}-{i}"
                env = env_for(self.work, f"bg-cache/{tag}", **self.extra)
                cmd = kag("build", str(EX / name / self.backend), "--backend", self.backend,
                          "--out", str(self.work / "bg-out" / tag), "--json")
                procs.append((subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                              time.perf_counter()))
            self.procs = [p for p, _ in procs]
            for proc, t0 in procs:
                rc = proc.wait()
                if self.stop_flag.is_set() and rc != 0:
                    continue  # killed at the arm's end: not counted
                self.done += rc == 0
                self.failed += rc != 0
                self.seconds.append(time.perf_counter() - t0)
            shutil.rmtree(self.work / "bg-cache", ignore_errors=True)
            shutil.rmtree(self.work / "bg-out", ignore_errors=True)

    def __enter__(self) -> "Builds":
        self.thread.start()
        time.sleep(8)  # past the builds' torch probe: compilers are running
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_flag.set()
        for proc in self.procs:
            proc.kill()
        self.thread.join()


def raw_loop(backend: str, calls: int) -> dict:
    dev = "cuda" if backend == "cuda" else "cpu"
    proc = subprocess.run([sys.executable, "-c", RAW, dev, str(calls)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout)


def score(args: argparse.Namespace, work: Path, task: Path) -> dict:
    cmd = kag("score", "--backend", args.backend, "--task", str(task), "--solution", str(EX / args.example / args.backend),
              "--json", "--num-timed", str(args.num_timed))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env_for(work, "fg-cache"), capture_output=True, text=True, timeout=600)
    try:
        res = json.loads(proc.stdout)
    except ValueError:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1], "wall_s": time.perf_counter() - t0}
    load = ((res.get("metadata") or {}).get("timing_load") or {}).get("candidate") or {}
    times = res.get("times_ms") or {}
    cal = (res.get("metadata") or {}).get("calibration") or {}
    timing = res.get("timing") or {}
    return {"reward": (res.get("reward") or {}).get("value"), "candidate_ms": times.get("candidate"),
            "calibration": cal, "candidate_timing": timing.get("candidate"),
            "window_timing": timing.get("candidate_window"), "notes": (res.get("metadata") or {}).get("notes"),
            "eager_ms": times.get("eager"), "compile_ms": times.get("compile"),
            "speedup_eager": res.get("speedup_vs_eager"), "others_cpus": load.get("others_cpus"),
            "error": res.get("error"), "wall_s": round(time.perf_counter() - t0, 1)}


def arm(args: argparse.Namespace, work: Path, task: Path, name: str, builds: dict[str, str] | None) -> dict:
    print(f"--- arm {name} ({time.strftime('%T')})", flush=True)
    b0 = cpu_busy()
    t0 = time.perf_counter()
    bg = Builds(work, args.backend, args.builds, builds) if builds is not None else None
    if bg:
        bg.__enter__()
    try:
        raws = [raw_loop(args.backend, args.raw_calls) for _ in range(args.raw_loops)]
        scores = [score(args, work, task) for _ in range(args.k)]
    finally:
        if bg:
            bg.__exit__()
    b1 = cpu_busy()
    row = {"arm": name, "build_cores": (builds or {}).get("KAG_BUILD_CORES", "default") if builds is not None else "-",
           "cpu_busy_pct": round(100 * (b1[0] - b0[0]) / max(1.0, b1[1] - b0[1]), 1),
           "builds_done": bg.done if bg else 0, "builds_failed": bg.failed if bg else 0,
           "build_s_mean": round(statistics.mean(bg.seconds), 1) if bg and bg.seconds else None,
           "raw": raws, "scores": scores, "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(row), flush=True)
    return row


def fmt(v: object, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec) if isinstance(v, (int, float)) else str(v)


def table(rows: list[dict], args: argparse.Namespace, started: float) -> str:
    lines = [f"# Timing beside builds: {args.example} ({args.backend}, {os.cpu_count()} cores)", "",
             f"`python3 bench/scripts/launch_bound.py {' '.join(sys.argv[1:])}`; {len(BUILD_SOLUTIONS)} solutions, "
             f"{args.builds} builds at once from empty caches; raw loop {args.raw_calls} calls x {args.raw_loops}; "
             f"kag score x {args.k}, num_timed {args.num_timed}; {time.time() - started:.0f} s in all.", "",
             "| arm | build cores | CPU busy % | builds done (failed) | build s | raw event p50 / p90 us "
             "| raw wall p50 / p90 / p99 us | kag candidate ms | kag eager ms | vs eager | reward | others_cpus |",
             "|---|---|---:|---|---:|---|---|---|---|---|---|---|"]
    for r in rows:
        raw = " ; ".join(f"{fmt(x.get('event_p50_us'), '.1f')} / {fmt(x.get('event_p90_us'), '.1f')}" for x in r["raw"])
        wall = " ; ".join(f"{fmt(x.get('wall_p50_us'), '.1f')} / {fmt(x.get('wall_p90_us'), '.1f')} / "
                          f"{fmt(x.get('wall_p99_us'), '.1f')}" for x in r["raw"])
        sc = r["scores"]
        col = lambda key, spec=".4g": ", ".join(fmt(s.get(key), spec) for s in sc)  # noqa: E731
        def measured(s: dict) -> str:  # the calls' median, and what was credited where the floor raised it
            median = (s.get("candidate_timing") or {}).get("median_ms")
            credited = s.get("candidate_ms")
            if median is not None and credited is not None and credited > median + 1e-9:
                return f"{fmt(median)} (credited {fmt(credited)})"
            return fmt(credited)

        cand = ", ".join(measured(s) for s in sc)
        lines.append(f"| {r['arm']} | {r['build_cores']} | {r['cpu_busy_pct']} | {r['builds_done']} ({r['builds_failed']}) "
                     f"| {fmt(r['build_s_mean'])} | {raw} | {wall} | {cand} | {col('eager_ms')} "
                     f"| {col('speedup_eager', '.3f')} | {col('reward', 'g')} | {col('others_cpus', '.2f')} |")
    errors = [f"- {r['arm']}: {s['error']}" for r in rows for s in r["scores"] if s.get("error")]
    errors += [f"- {r['arm']} raw: {x['error']}" for r in rows for x in r["raw"] if x.get("error")]
    return "\n".join(lines + ([""] + ["Errors:"] + errors if errors else [])) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--builds", type=int, default=8, help="builds at once in the loaded arms")
    parser.add_argument("--k", type=int, default=3, help="kag score runs per arm")
    parser.add_argument("--num-timed", type=int, default=100)
    parser.add_argument("--raw-calls", type=int, default=20000)
    parser.add_argument("--raw-loops", type=int, default=4, help="raw loops per arm")
    parser.add_argument("--arms", default="alone,builds,builds-all-cores,alone")
    parser.add_argument("--size", default="16,4096", help="the ReLU input's shape (launch-bound when small)")
    parser.add_argument("--example", default="relu",
                        help="examples/NAME/<backend> to score (relu: on the small task; else on its own task)")
    parser.add_argument("--work", help="work folder (default: a fresh temp folder)")
    parser.add_argument("--out", help="also write the table here")
    parser.add_argument("--json", help="the rows as JSON here")
    args = parser.parse_args()
    started = time.time()
    work = Path(args.work or tempfile.mkdtemp(prefix="kag-launch-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.example == "relu":
        task = work / "relu_small.py"
        task.write_text(TASK.replace("SIZE", args.size))
    else:  # another example's own task (the KernelBench sample's file)
        task = EX / "kernelbench_sample" / (EX / args.example / "task.txt").read_text().strip()
    print("warm-up (builds the foreground solution, caches its baselines):", json.dumps(score(args, work, task)),
          flush=True)
    arms = {"alone": None, "builds": {}, "builds-all-cores": {"KAG_BUILD_CORES": "all"}}
    rows = [arm(args, work, task, name, arms[name]) for name in args.arms.split(",")]
    text = table(rows, args, started)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
