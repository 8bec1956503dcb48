"""Throughput of `kag data filter` and of an RL stage's environment steps through the executors:
the same work through `local` and `ray`, with the verdicts compared.

  filter: the CPU (or CUDA) twins of the examples as composed tasks, each checked once per copy
          (`ExecFilter.run` here, `ExecFilter.run_on(RayExecutor())` on a local Ray cluster);
  env:    the examples' solutions as single-turn answers, stepped by `kernel-single` environments
          the way `run_episodes` steps one turn: one after another, `env_workers` at once on this
          machine, and `env_workers` at once with the evaluations on Ray workers.

    python3 bench/scripts/scale_stages.py --backend cpu --workers 2 --out bench/out/stages_cpu.md
    python3 bench/scripts/scale_stages.py --backend cuda --workers 1 --out bench/out/stages_h100.md
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
EXAMPLES = REPO / "examples"
NAMES = ("relu", "sigmoid", "tanh", "gelu", "elu", "softsign")


def fresh_caches(tag: str) -> None:
    """Every configuration starts cold (kag's build and baseline caches, inductor's), as a stage's
    first step does: otherwise the later rows reuse the first row's builds. Ray's local cluster,
    started after this, hands the same variables to its workers."""
    root = Path(tempfile.mkdtemp(prefix=f"kag-scale-{tag}-"))
    os.environ["KAG_CACHE_DIR"] = str(root / "kag")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "inductor")


def fenced(folder: Path) -> str:
    """A solution folder as the single-turn answer format (fenced files)."""
    lang = "cuda" if folder.name == "cuda" else "cpp"
    text = "```python model_new.py\n" + (folder / "model_new.py").read_text() + "```\n"
    for f in sorted((folder / "kernels").iterdir()):
        text += f"\n```{lang} kernels/{f.name}\n{f.read_text()}```\n"
    return text


def filter_rows(args: argparse.Namespace) -> list[dict]:
    from kag.plugins.data.filter_exec import ExecFilter
    from kag.plugins.executors.ray_cluster import RayExecutor

    items = [(f"{n}#{i}", (EXAMPLES / n / args.twin / "model.py").read_text())
             for i in range(args.copies) for n in NAMES]
    opts = dict(device=args.device, timeout_s=300, compile_backend="inductor")
    rows, first = [], None
    for name, run in [("local", lambda: ExecFilter(**opts, workers=args.workers).run(items)),
                      ("ray", lambda: ExecFilter(**opts, batch=args.batch).run_on(RayExecutor(), items, args.workers))]:
        fresh_caches(f"filter-{name}")
        t0 = time.perf_counter()
        got = {k: (v or {}).get("ok") if v else None for k, v in run()}
        wall = time.perf_counter() - t0
        first = first or got
        rows.append({"what": f"data filter, {name}", "n": len(items), "wall_s": wall, "same": got == first,
                     "kept": sum(1 for v in got.values() if v)})
    return rows


def env_rows(args: argparse.Namespace) -> list[dict]:
    import ray

    from kag.core.eval.serve.remote import ExecutorEvaluations
    from kag.core.plugins import Plugins
    import functools

    from kag.plugins.algorithms.ppo.rollout import _run_all
    from kag.plugins.executors.ray_cluster import RayExecutor

    plugins = Plugins(load_entrypoints=False)
    pairs = [(n, fenced(EXAMPLES / n / args.twin)) for _ in range(args.copies) for n in NAMES]
    tasks = {}
    for n in NAMES:
        tasks[n] = f"local:{EXAMPLES / n / args.twin / 'model.py'}"
    opts = {"backend": args.backend, "num_timed": args.num_timed, "warmup": 3}
    rows, first = [], None
    # the timed part is the steps; starting the Ray cluster and its workers is outside it (once per stage)
    for name, workers, remote in [("local, one after another", 1, False),
                                  (f"local, env_workers={args.workers}", args.workers, False),
                                  (f"ray, env_workers={args.workers}", args.workers, True)]:
        fresh_caches(f"env-{workers}-{remote}")
        pool = ExecutorEvaluations(RayExecutor().session(args.workers, gpu=args.backend != "cpu"), plugins) \
            if remote else None
        envs = [plugins.create("environment", "kernel-single", dataset=tasks[n], plugins=plugins, pool=pool, **opts)
                for n, _ in pairs]
        for env in envs:
            env.reset("model")
        t0 = time.perf_counter()
        results = _run_all([functools.partial(e.step, a) for e, (_, a) in zip(envs, pairs)], workers)
        wall = time.perf_counter() - t0
        if pool is not None:
            pool.close()
        rewards = [r.reward for r in results]
        first = first or rewards
        rows.append({"what": f"RL env steps, {name}", "n": len(pairs), "wall_s": wall, "same": rewards == first,
                     "rewards": " ".join(f"{r:g}" for r in rewards)})
    if ray.is_initialized():
        ray.shutdown()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--copies", type=int, default=2, help="copies of each example task")
    ap.add_argument("--batch", type=int, default=4, help="tasks per filter job on Ray")
    ap.add_argument("--num-timed", type=int, default=20)
    ap.add_argument("--only", default="filter,env")
    ap.add_argument("--out")
    args = ap.parse_args()
    args.twin = "cpu" if args.backend == "cpu" else "cuda"
    args.device = args.backend
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = (filter_rows(args) if "filter" in args.only else []) + (env_rows(args) if "env" in args.only else [])
    lines = [f"# bench/scripts/scale_stages.py: backend {args.backend}, {args.workers} workers", "",
             f"Command: `python3 {' '.join(sys.argv)}`  ",
             f"Machine: {os.cpu_count()} CPUs, {platform.machine()}, {started}", "",
             "| work | items | wall s | per min | same verdicts as the first row | detail |",
             "| --- | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        detail = f"kept {r['kept']}" if "kept" in r else f"rewards {r['rewards']}"
        lines.append(f"| {r['what']} | {r['n']} | {r['wall_s']:.1f} | {r['n'] / r['wall_s'] * 60:.2f} | "
                     f"{'yes' if r['same'] else 'NO'} | {detail} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
