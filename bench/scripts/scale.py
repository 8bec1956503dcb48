"""Throughput of `kag eval` through the `local` and `ray` executors.

Runs the same replayed episodes (each one compiles, verifies, profiles and is scored by the
trusted evaluator) through each configuration as a real `kag eval` subprocess into a fresh output
folder, checks that every configuration gives the same verdicts as the first `local` one, and
prints a markdown table: wall time, episodes per minute, per-worker efficiency against one worker.

  CPU (CPU twins of KernelBench level-1 tasks, examples/*/cpu, with their replays):
    python3 bench/scripts/scale.py --cpu --configs local:2,ray:2
  GPU (KernelBench level-1 with the replays of examples/replays/cuda; KernelBench at .kb):
    python3 bench/scripts/scale.py --kernelbench .kb --configs local:1,ray:1            # Ray's overhead
    python3 bench/scripts/scale.py --kernelbench .kb --configs ray:1,ray:2,ray:all      # scaling over GPUs
  More episodes than replays: --repeat N scores every chosen task N times (N copies of the task under
  r1/, r2/, ... of a local dataset, each with the task's replay), --level2-ids adds level-2 problems:
    python3 bench/scripts/scale.py --kernelbench .kb --level2-ids 14 --repeat 2 --configs local:4,local:1,local:4
  Where the time goes: --timeline runs each configuration with `kag eval --timeline` and
  draws each one's lanes (bench/scripts/timeline_draw.py) into --keep; --draw FILE draws an existing file.
    python3 bench/scripts/scale.py --cpu --configs local:1,local:2 --timeline --keep runs/scale
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
# level-1 problems with a CUDA replay in examples/replays/cuda (bench/scripts/gpu_adversarial_then_eval.sh)
GPU_IDS = "5,12,19-32,47,48,49,53,88"


def cpu_dataset(root: Path, names: list[str]) -> tuple[str, str]:
    """A local dataset of CPU twins and a folder of their replays (the shape kag eval takes)."""
    tasks, replays = root / "tasks", root / "replays"
    tasks.mkdir(parents=True)
    replays.mkdir()
    for name in names:
        shutil.copy(EXAMPLES / name / "cpu" / "model.py", tasks / f"{name}.py")
        shutil.copy(EXAMPLES / name / "cpu" / "replay.json", replays / f"{name}.json")
    return f"local:{tasks}", str(replays)


def kernelbench_dataset(root: Path, kb: Path, ids: dict[int, set[int]], repeat: int) -> tuple[str, str]:
    """A local dataset of ``repeat`` copies of the chosen KernelBench problems that have a CUDA replay
    (``r1/level1/19_ReLU.py``...), and the replays at the same names: the same episode scored
    ``repeat`` times, as RL scores one task many times."""
    sys.path.insert(0, str(REPO))
    tasks, replays = root / "tasks", root / "replays"
    n = 0
    for level, wanted in ids.items():
        for replay in sorted((EXAMPLES / "replays" / "cuda" / f"level{level}").glob("*.json")):
            if int(replay.stem.split("_")[0]) not in wanted:
                continue
            for r in range(1, repeat + 1):
                rel = Path(f"r{r}") / f"level{level}"
                (tasks / rel).mkdir(parents=True, exist_ok=True)
                (replays / rel).mkdir(parents=True, exist_ok=True)
                shutil.copy(kb / f"level{level}" / f"{replay.stem}.py", tasks / rel / f"{replay.stem}.py")
                shutil.copy(replay, replays / rel / replay.name)
                n += 1
    if not n:
        raise SystemExit(f"no replay in {EXAMPLES / 'replays' / 'cuda'} matches the chosen ids")
    return f"local:{tasks}", str(replays)


def gpu_list() -> list[str]:
    sys.path.insert(0, str(REPO))
    from kag.core.eval.orchestrator.gpu_pool import list_gpus

    return list_gpus()


def gpus_for(executor: str, workers: int, gpus: list[str] | None) -> dict[str, str]:
    """The environment that gives a `local` run of N workers N GPUs: one worker with four GPUs
    visible lends the next judge of an episode another GPU while the last one's judge still exits
    (0.2-0.3 s a judge on an H200), which a run on one GPU, or a Ray worker of one GPU, cannot."""
    if executor != "local" or gpus is None or workers >= len(gpus):
        return {}
    return {"CUDA_VISIBLE_DEVICES": ",".join(gpus[:workers])}


def run_config(executor: str, workers: int, dataset: str, replays: str, extra: list[str], out: Path,
               timeline: bool = False, gpus: list[str] | None = None) -> dict:
    args = [sys.executable, "-m", "kag.cli.main", "eval", "--dataset", dataset, *extra, *(["--timeline"] * timeline),
            "--policy", "replay",
            "--policy-option", f"path={replays}", "--out", str(out), "--concurrency", str(workers),
            "--plugin", f"executor={executor}"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               **gpus_for(executor, workers, gpus))
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{executor}:{workers} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # pass/fail per task must match; rewards above 1 depend on measured speed-ups (noise on a loaded machine)
    verdicts = {r["task"]: bool((r.get("result") or {}).get("correct")) for r in rows}
    rewards = [r["reward"] for r in rows if r.get("reward") is not None]
    return {"executor": executor, "workers": workers, "episodes": len(rows), "wall_s": round(wall, 1),
            "per_min": round(60 * len(rows) / wall, 2), "verdicts": verdicts, "passed": sum(verdicts.values()),
            "mean_reward": round(sum(rewards) / len(rows), 2) if rows else None}


def table(results: list[dict], device: str) -> str:
    base = {}  # the one-worker rate of each executor (else the smallest run), for efficiency
    for r in results:
        if r["executor"] not in base or r["workers"] < base[r["executor"]]["workers"]:
            base[r["executor"]] = r
    ref = results[0]
    lines = [f"device: {device}", "",
             "| executor | workers | episodes | passed | mean reward | wall s | episodes/min | per-worker efficiency "
             "| rate vs first row | same pass/fail as first row |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        b = base[r["executor"]]
        eff = (r["per_min"] / r["workers"]) / (b["per_min"] / b["workers"])
        lines.append(f"| {r['executor']} | {r['workers']} | {r['episodes']} | {r['passed']} | {r['mean_reward']} "
                     f"| {r['wall_s']} "
                     f"| {r['per_min']} | {eff:.2f} | {r['per_min'] / ref['per_min']:.3f}x "
                     f"| {'yes' if r['verdicts'] == ref['verdicts'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="CPU twins on the cpu backend")
    ap.add_argument("--kernelbench", help="KernelBench checkout (GPU runs)")
    ap.add_argument("--ids", default=GPU_IDS, help="level-1 ids (GPU runs)")
    ap.add_argument("--level2-ids", default="", help="level-2 ids too (GPU runs; a local copy of the problems)")
    ap.add_argument("--repeat", type=int, default=1, help="score each task this many times (GPU runs)")
    ap.add_argument("--tasks", default="relu,sigmoid,tanh,gelu,elu,softsign",
                    help="examples with a CPU twin (CPU runs)")
    ap.add_argument("--configs", default="local:2,ray:2", help="EXECUTOR:WORKERS,... (WORKERS may be 'all')")
    ap.add_argument("--num-timed", type=int, default=20)
    ap.add_argument("--json", help="also write the measurements here")
    ap.add_argument("--timeline", action="store_true", help="kag eval --timeline per configuration, drawn")
    ap.add_argument("--keep", help="keep the runs' folders here (default: a temp folder, removed)")
    ap.add_argument("--draw", metavar="FILE", help="only draw this timeline file (bench/scripts/timeline_draw.py)")
    args = ap.parse_args()
    from timeline_draw import draw

    if args.draw:
        png = str(Path(args.draw).with_suffix(".png"))
        print(draw(args.draw, png) + f"picture: {png}")
        return
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kag-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.cpu:
        dataset, replays = cpu_dataset(work, args.tasks.split(","))
        extra = ["--backend", "cpu"]
        gpus = None
        all_workers, device = os.cpu_count() or 1, f"CPU, {os.cpu_count()} cores ({platform.processor() or 'cpu'})"
    else:
        if not args.kernelbench:
            raise SystemExit("give --kernelbench PATH (GPU runs) or --cpu")
        if args.repeat > 1 or args.level2_ids:
            from kag.plugin import parse_ids

            chosen = {1: set(parse_ids(args.ids) or ()), 2: set(parse_ids(args.level2_ids) or ())}
            dataset, replays = kernelbench_dataset(work, Path(args.kernelbench), chosen, args.repeat)
            extra = ["--backend", "cuda"]
        else:
            dataset, replays = f"kernelbench:{args.kernelbench}", str(EXAMPLES / "replays" / "cuda")
            extra = ["--level", "1", "--ids", args.ids, "--backend", "cuda"]
        gpus = gpu_list()
        all_workers = len(gpus)
        import pynvml

        pynvml.nvmlInit()
        device = f"{all_workers} x {pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))}"
    extra += ["--num-timed", str(args.num_timed)]
    results = []
    for i, config in enumerate(args.configs.split(",")):
        executor, _, n = config.partition(":")
        workers = all_workers if n == "all" else int(n or 1)
        print(f"running {executor} with {workers} worker(s) ...", file=sys.stderr, flush=True)
        out = work / f"{i}-{executor}-{workers}"
        results.append(run_config(executor, workers, dataset, replays, extra, out, args.timeline, gpus))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "verdicts"}), file=sys.stderr, flush=True)
        if args.timeline:
            print(f"## {executor}:{workers}\n\n" + draw(str(out / "timeline.jsonl"), str(out / "timeline.png")) +
                  f"\npicture: {out / 'timeline.png'}\n", flush=True)
    print(table(results, device))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
