"""Evaluator benchmark for the device: build speed, kag score latency and timing stability.

On one workspace, in one run, it reports: the cold build, the rebuild after editing one .cu file,
a full `torch.utils.cpp_extension.load` rebuild of the same sources (what the paper's compile
script does every time), `kag score` end to end with cold and with cached baselines, and the
spread of 10 repeated timings of one candidate. Prints a table; writes JSON to $OUT if set.
Usage: python bench/scripts/evaluator.py [--example relu] [--task PATH_TO_TASK.py]
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
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def print_timeline(title: str, stderr: str, result: dict) -> None:
    """KAG_TRACE marks of the orchestrator, judge and candidate, sorted, relative to the first."""
    trace = [line for line in (stderr + (result["metadata"].get("candidate_output") or "")).splitlines()
             if line.startswith("[kag-trace]")]
    trace.sort(key=lambda line: float(line.split()[1]))
    t0 = float(trace[0].split()[1]) if trace else 0.0
    print(f"  timeline of {title} (s after the first mark):")
    for line in trace:
        _, stamp, rest = line.split(" ", 2)
        print(f"    {float(stamp) - t0:7.3f}  {rest}")


def score_through_server(repo: Path, env: dict, cases: list, backend: str = "cuda") -> list[dict]:
    """Start `kag serve`, wait until a judge is warm, then time `kag score --server` (a fresh CLI
    process each time, as a user runs it) twice per case; the second run of the first case traced."""
    from kag.core.eval.serve.server import ping

    sock = Path(tempfile.mkdtemp(prefix="kag-srv-")) / "eval.sock"
    server_env = dict(env, KAG_TRACE="1")
    log = open(sock.parent / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "kag.cli.main", "serve", "--socket", str(sock)],
                            stderr=log, env=server_env)
    out = []
    try:
        def wait_warm() -> None:
            deadline = time.time() + 120
            while time.time() < deadline:
                try:
                    if ping(sock)["warm_judges_ready"]:
                        return
                except Exception:  # noqa: BLE001 - not up yet
                    pass
                time.sleep(0.2)
        for k, (name, task_path, solution) in enumerate(cases):
            cmd = [sys.executable, "-m", "kag.cli.main", "score", "--server", str(sock), "--task", str(task_path),
                   "--solution", str(solution), "--backend", backend, "--json"]
            seconds, result, marks = [], None, ""
            for _ in range(2):
                wait_warm()  # a judge is warm, as one is after a few seconds of an agent's thinking
                log.flush()
                offset = (sock.parent / "serve.log").stat().st_size
                s, p = timed(lambda: subprocess.run(cmd, capture_output=True, text=True, env=env))
                assert p.returncode == 0, p.stderr[-2000:]
                seconds.append(s)
                result = json.loads(p.stdout)
                with open(sock.parent / "serve.log") as f:
                    f.seek(offset)
                    marks = f.read()
            assert result is not None
            out.append({"example": name, "seconds": seconds, "reward": result["reward"]["value"],
                        "times_ms": result["times_ms"], "durations_s": result["durations_s"]})
            print(f"kag score --server, {name}: {seconds[0]:.2f} s, then {seconds[1]:.2f} s; reward "
                  f"{result['reward']}, phases {result['durations_s']}", flush=True)
            if k == 0:
                print_timeline(f"the second kag score --server ({name}; marks of the server's processes)",
                               marks, result)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--example", default="relu")
    ap.add_argument("--task", default=None)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--server-examples", default="diag_matmul",
                    help="more examples to score through `kag serve` (comma list)")
    args = ap.parse_args()

    import torch

    from kag.core.eval.orchestrator.build import build_solution
    from kag.core.eval.orchestrator.evaluate import EvalOptions, evaluate
    from kag.core.plugins import Plugins
    from kag.core.records import Task
    from kag.core.agent.workspace import make_workspace, read_solution, write_solution

    example = REPO / "examples" / args.example
    kernelbench = Path(os.environ.get("KAG_KERNELBENCH", REPO / "examples" / "kernelbench_sample"))
    task_path = Path(args.task) if args.task else kernelbench / (example / "task.txt").read_text().strip()
    task = Task(name=task_path.stem, source="file", code=task_path.read_text(), path=str(task_path))
    work = Path(tempfile.mkdtemp(prefix="kag-bench-"))
    cache = work / "cache"
    os.environ["KAG_CACHE_DIR"] = str(cache)
    plugins = Plugins()
    backend = plugins.create("backend", "cuda")
    ws = make_workspace(task, work / "ws", backend="cuda")
    write_solution(read_solution(example / "cuda"), ws)
    rows: dict[str, object] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                               "task": task.name, "example": args.example}

    # 1. builds: cold, unchanged, after editing one .cu
    cold_s, cold = timed(lambda: build_solution(read_solution(ws), backend, work / "out"))
    assert cold.ok, cold.log
    warm_s, warm = timed(lambda: build_solution(read_solution(ws), backend, work / "out"))
    cu = next((ws / "kernels").glob("*.cu"))
    cu.write_text(cu.read_text() + f"\n// edit {uuid.uuid4().hex}\n")
    edit_s, edit = timed(lambda: build_solution(read_solution(ws), backend, work / "out"))
    assert edit.ok, edit.log
    rows.update(build_cold_s=cold_s, build_unchanged_s=warm_s, build_after_edit_s=edit_s,
                build_after_edit_compiled=edit.compiled)
    print(f"builds: cold {cold_s:.2f} s, unchanged {warm_s:.3f} s, after editing {cu.name} {edit_s:.2f} s "
          f"(compiled {edit.compiled})", flush=True)

    # 2. the paper's way: torch.utils.cpp_extension.load, a full rebuild every time
    from torch.utils.cpp_extension import load

    def full_load():
        build_dir = work / f"ext-{uuid.uuid4().hex[:8]}"
        build_dir.mkdir()
        sources = [str(ws / "binding.cpp")] + [str(p) for p in sorted((ws / "kernels").iterdir())
                                                 if p.suffix in (".cu", ".cpp")]
        load(name="cuda_extension", sources=sources, extra_include_paths=[str(ws)],
             extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "--use_fast_math"], build_directory=str(build_dir),
             verbose=False)

    full_s, _ = timed(full_load)
    rows.update(cpp_extension_full_rebuild_s=full_s, rebuild_speedup_vs_cpp_extension=full_s / edit_s)
    print(f"cpp_extension.load full rebuild {full_s:.2f} s: kag's rebuild is {full_s / edit_s:.1f}x faster", flush=True)

    # 3. kag score end to end (a fresh process, as a user runs it): cold, then cached baselines
    score = [sys.executable, "-m", "kag.cli.main", "score", "--task", str(task_path), "--solution", str(ws),
             "--backend", "cuda", "--json"]
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{os.environ.get('PYTHONPATH', '')}")
    cold_score_s, proc = timed(lambda: subprocess.run(score, capture_output=True, text=True, env=env))
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = json.loads(proc.stdout)
    traced = dict(env, KAG_TRACE="1")
    cached_score_s, proc = timed(lambda: subprocess.run(score, capture_output=True, text=True, env=traced))
    second = json.loads(proc.stdout)
    print_timeline("the cached one-shot kag score", proc.stderr, second)
    rows.update(score_cold_baselines_s=cold_score_s, score_cached_baselines_s=cached_score_s,
                score_reward=second["reward"], score_times_ms=second["times_ms"],
                baseline_cache=second["metadata"].get("baseline_cache"), first_reward=first["reward"])
    rows.update(score_cold_durations_s=first["durations_s"], score_cached_durations_s=second["durations_s"])
    print(f"kag score: cold baselines {cold_score_s:.2f} s, cached {cached_score_s:.2f} s, "
          f"reward {second['reward']}, times {second['times_ms']}", flush=True)
    print(f"  phases, cold (s):   {first['durations_s']}", flush=True)
    print(f"  phases, cached (s): {second['durations_s']}", flush=True)

    # 3b. the same through `kag serve` (judges kept warm), each `kag score --server` a fresh CLI process
    server_rows = score_through_server(REPO, env, [(args.example, task_path, ws)] + [
        (name, kernelbench / (REPO / "examples" / name / "task.txt").read_text().strip(), REPO / "examples" / name / "cuda")
        for name in args.server_examples.split(",") if name and name != args.example])
    rows["score_via_server"] = server_rows

    # 4. the evaluation inside a long-lived process (an agent episode, kag eval): a judge kept warm
    from kag.core.eval.orchestrator.judge_process import keep_judges_warm

    keep_judges_warm(1)
    time.sleep(15)  # the warm judge imports torch meanwhile, as it does while an agent thinks
    warm_judge_s, warm_result = timed(lambda: evaluate(task, read_solution(ws), EvalOptions(backend="cuda"), plugins))
    rows.update(score_warm_judge_s=warm_judge_s, score_warm_durations_s=warm_result.durations_s)
    print(f"evaluate() with a warm judge, cached baselines: {warm_judge_s:.2f} s, reward {warm_result.reward}, "
          f"phases {warm_result.durations_s}", flush=True)

    # 5. the same candidate timed 10 times, each in a fresh evaluation
    medians, cvs = [], []
    for _ in range(args.repeats):
        r = evaluate(task, read_solution(ws), EvalOptions(backend="cuda", do_correctness=False), plugins)
        stats = r.timing["candidate"]
        medians.append(stats.median_ms)
        cvs.append(stats.std_ms / stats.mean_ms)
        print(f"repeat {len(medians)}: median {stats.median_ms:.4f} ms, within-run CV {100 * cvs[-1]:.2f}%", flush=True)
    rows.update(repeat_medians_ms=medians, repeat_cv_across_runs=statistics.pstdev(medians) / statistics.mean(medians),
                repeat_cv_within_run_median=statistics.median(cvs))

    table = [
        ("cold build", f"{cold_s:.2f} s"),
        ("rebuild, nothing changed", f"{warm_s:.3f} s"),
        ("rebuild after editing one .cu", f"{edit_s:.2f} s ({', '.join(edit.compiled)})"),
        ("cpp_extension.load full rebuild", f"{full_s:.2f} s"),
        ("rebuild speed-up vs cpp_extension", f"{full_s / edit_s:.1f}x"),
        ("kag score, cold baselines", f"{cold_score_s:.2f} s"),
        ("kag score, cached baselines", f"{cached_score_s:.2f} s (reward {second['reward']['value']})"),
        ("  of which in the judge process", f"{second['durations_s'].get('judge_wall', float('nan')):.2f} s"),
        *[(f"kag score --server, {r['example']} (cached)", f"{r['seconds'][0]:.2f} s, again {r['seconds'][1]:.2f} s "
           f"(reward {r['reward']})") for r in server_rows],
        ("evaluate() with a warm judge (cached)", f"{warm_judge_s:.2f} s (reward {warm_result.reward.value})"),
        (f"{args.repeats} repeated timings (median ms)", " ".join(f"{m:.4f}" for m in medians)),
        ("CV across repeats", f"{100 * rows['repeat_cv_across_runs']:.2f}%"),
        ("CV within a run (median)", f"{100 * rows['repeat_cv_within_run_median']:.2f}%"),
    ]
    print(f"\nevaluator benchmark: {rows['example']} on {rows['gpu']} (torch {rows['torch']})")
    for k, v in table:
        print(f"  {k:<38} {v}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "evaluator.json").write_text(json.dumps(rows, indent=2, default=str))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
