"""Evaluations per minute: N concurrent OpenRLHF requests to `kag serve --http` vs the same
evaluations through `kag eval` (replay policy).

The same solutions (examples/NAME/{cuda,cpu}) for the same tasks (the KernelBench sample's file on
cuda, the example's CPU twin on cpu), N of them cycling over the chosen examples, the same number
of evaluations in progress at once (the server's --workers, kag eval's --concurrency) and the same
--num-timed. A warm-up pass through the server first evaluates every distinct task once (not
counted), so both measured phases find the builds and baseline timings cached. kag eval's replay
reads model_new.py, writes the solution's files and ends, so each episode is one evaluation (its final scoring); its
time is the CLI's wall clock from start to exit. Each phase stops at --phase-timeout and counts
what finished.

CPU:  python3 bench/scripts/serve_http.py --backend cpu --requests 4 --workers 2 --num-timed 5 relu sigmoid
H100: python3 bench/scripts/serve_http.py --backend cuda     (32 requests over 4 examples; under 8 minutes)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from kag.core.eval.serve.http_server import request_json  # noqa: E402 - after the checkout is on the path
EXAMPLES = REPO / "examples"
GPU_DEFAULT = ["diag_matmul", "gemm_divide_sum_scaling", "sum_reduction", "relu"]


def task_file(example: str, backend: str) -> Path:
    if backend == "cpu":
        return EXAMPLES / example / "cpu" / "model.py"
    return EXAMPLES / "kernelbench_sample" / (EXAMPLES / example / "task.txt").read_text().strip()


def answer(solution: Path) -> str:
    """The solution as a model's answer: fenced files labelled with their paths."""
    blocks = [f"```python model_new.py\n{(solution / 'model_new.py').read_text()}```"]
    blocks += [f"```cpp kernels/{k.name}\n{k.read_text()}```" for k in sorted((solution / "kernels").iterdir())]
    return "\n".join(blocks) + "\n"


def replay_script(solution: Path) -> list[dict]:
    """Read model_new.py (the write tool wants that first), write every file, then stop: the
    episode's one evaluation is its final scoring."""
    steps = [{"tool": "read", "args": {"path": "model_new.py"}}]
    steps += [{"tool": "write", "args": {"path": f"kernels/{k.name}", "content": k.read_text()}}
             for k in sorted((solution / "kernels").iterdir())]
    steps.append({"tool": "write", "args": {"path": "model_new.py", "content": (solution / "model_new.py").read_text()}})
    return steps + [{"content": "done"}]


def start_server(tmp: Path, args: argparse.Namespace, env: dict) -> tuple[subprocess.Popen, str, Path]:
    log = tmp / "serve.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "kag.cli.main", "serve", "--socket", str(tmp / "s" / "eval.sock"),
                                 "--http", "127.0.0.1:0", "--task-root", str(EXAMPLES), "--backend", args.backend,
                                 "--num-timed", str(args.num_timed),
                                 "--workers", str(args.workers), "--warm", str(args.workers),
                                 "--max-queue", str(max(args.requests, 1))], stderr=f, env=env)
    deadline = time.monotonic() + 180
    while not (found := re.search(r"HTTP on (http://\S+)", log.read_text())):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"kag serve did not start:\n{log.read_text()}")
        time.sleep(0.1)
    return proc, found[1], log


def post_rewards(url: str, jobs: list[tuple[str, Path]], backend: str, concurrency: int,
                 timeout: float) -> tuple[float, list]:
    """Each job one /get_reward request, ``concurrency`` at once; (seconds, [(reward, kind, error)])."""
    def one(job: tuple[str, Path]) -> tuple[float, str | None, str | None]:
        example, task = job
        try:
            status, _, out = request_json(url + "/get_reward", {
                "query": [answer(EXAMPLES / example / backend)], "prompts": [""], "labels": [str(task)]}, timeout=timeout)
        except OSError as exc:
            return -1.0, "http", str(exc)
        if status != 200:
            return -1.0, f"http {status}", str(out)[:300]
        return out["rewards"][0], out["error_kinds"][0], out["errors"][0]

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(one, jobs))
    return time.monotonic() - start, results


def run_kag_eval(tmp: Path, jobs: list[tuple[str, Path]], args: argparse.Namespace, env: dict) -> tuple[float, list]:
    tasks, replays, out = tmp / "tasks", tmp / "replays", tmp / "eval_out"
    for d in (tasks, replays):
        d.mkdir()
    for i, (example, task) in enumerate(jobs):
        name = f"{i:03d}_{example}"
        shutil.copy(task, tasks / f"{name}.py")
        (replays / f"{name}.json").write_text(json.dumps(replay_script(EXAMPLES / example / args.backend)))
    cmd = [sys.executable, "-m", "kag.cli.main", "eval", "--dataset", f"local:{tasks}", "--policy", "replay",
           "--policy-option", f"path={replays}", "--backend", args.backend, "--num-timed", str(args.num_timed),
           "--concurrency", str(args.workers), "--out", str(out)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=args.phase_timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        print(f"kag eval: stopped at --phase-timeout {args.phase_timeout} s", flush=True)
    seconds = time.monotonic() - start
    (tmp / "kag_eval.log").write_text(log)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()] \
        if (out / "results.jsonl").exists() else []
    results = []
    for row in rows:
        result = row.get("result") or row
        reward = (result.get("reward") or {}).get("value", -1.0)
        results.append((reward, result.get("error_kind"), result.get("error")))
    if not rows:
        print(log[-3000:])
    return seconds, results


def summary(name: str, seconds: float, results: list, n: int) -> dict:
    done = [r for r in results if r[1] is None or not str(r[1]).startswith("http")]
    correct = sum(1 for r in done if r[0] >= 1)
    row = {"path": name, "evaluations": len(done), "of": n, "seconds": round(seconds, 1),
           "per_minute": round(60 * len(done) / seconds, 2) if seconds else 0.0, "correct": correct,
           "mean_reward": round(sum(r[0] for r in done) / len(done), 3) if done else None}
    for reward, kind, error in results:
        if kind:
            print(f"  {name}: {kind}: {(error or '')[:200]}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("examples", nargs="*", help="examples/NAME to use (default: 4 on cuda, relu+sigmoid on cpu)")
    parser.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--requests", type=int, default=32, help="evaluations (one request each), all sent at once")
    parser.add_argument("--workers", type=int, default=None,
                        help="evaluations in progress at once, both paths (default: 2 per GPU, at least 2)")
    parser.add_argument("--num-timed", type=int, default=100)
    parser.add_argument("--phase-timeout", type=float, default=150.0, help="seconds per phase before it is stopped")
    parser.add_argument("--json", type=Path, help="write the table's rows here too")
    args = parser.parse_args()
    examples = args.examples or (GPU_DEFAULT if args.backend == "cuda" else ["relu", "sigmoid"])
    if args.workers is None:
        from kag.core.eval.orchestrator.gpu_pool import list_gpus

        args.workers = max(2, 2 * len(list_gpus())) if args.backend == "cuda" else 2
    jobs = [(examples[i % len(examples)], task_file(examples[i % len(examples)], args.backend))
            for i in range(args.requests)]
    tmp = Path(tempfile.mkdtemp(prefix="kag-bench-http-"))
    env = dict(os.environ, KAG_CACHE_DIR=os.environ.get("KAG_CACHE_DIR") or str(tmp / "cache"),
               PYTHONPATH=f"{REPO}:{os.environ.get('PYTHONPATH', '')}")
    print(f"{args.requests} evaluations over {len(examples)} examples on {args.backend}, {args.workers} at once, "
          f"num_timed {args.num_timed}; logs in {tmp}", flush=True)
    proc, url, log = start_server(tmp, args, env)
    try:
        distinct = list(dict.fromkeys(jobs))
        t0 = time.monotonic()
        _, warm = post_rewards(url, distinct, args.backend, len(distinct), args.phase_timeout)
        print(f"warm-up: {len(distinct)} distinct tasks through the server in {time.monotonic() - t0:.1f} s "
              f"(builds and baselines cached), rewards {[r[0] for r in warm]}", flush=True)
        seconds, results = post_rewards(url, jobs, args.backend, args.requests, args.phase_timeout)
        http = summary(f"kag serve --http ({args.requests} concurrent requests)", seconds, results, args.requests)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    print(f"server: {log.read_text().strip().splitlines()[-1]}", flush=True)
    seconds, results = run_kag_eval(tmp, jobs, args, env)
    cli = summary(f"kag eval --concurrency {args.workers}", seconds, results, args.requests)
    print("\n| path | evaluations | seconds | evaluations/min | correct | mean reward |\n|---|---:|---:|---:|---:|---:|")
    for row in (http, cli):
        print(f"| {row['path']} | {row['evaluations']}/{row['of']} | {row['seconds']} | {row['per_minute']} | "
              f"{row['correct']} | {row['mean_reward']} |")
    if http["per_minute"] and cli["per_minute"]:
        print(f"\nkag serve --http / kag eval: {http['per_minute'] / cli['per_minute']:.2f}x evaluations per minute")
    if args.json:
        args.json.write_text(json.dumps([http, cli], indent=1))


if __name__ == "__main__":
    main()
