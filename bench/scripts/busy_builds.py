"""Builds on a busy machine: N submissions at once through ``kag serve``, cold cache.

    python bench/scripts/busy_builds.py --n 16 [--phases same,different] [--out bench/out/busy_builds_cpu.md]

``same``: N ``kag score --server`` clients submit one honest solution (the CPU ReLU example) at once to
a server started on an empty cache (``kag serve --warm 2``); each must get the reward it gets alone
(scored first, alone, on a cache of its own). ``different``: N honest solutions that differ in their
kernel source (a comment of their own: N different compile units, one shared binding) at once on a
new empty cache; none may get a build verdict that blames the
solution (an evaluator fault, ``judge_error`` or a starved build, is allowed and counted; a wrong
reward is not). Prints a markdown table and writes it to ``--out``. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import EX, Server, collect, env_for, kag, latencies, reward_of, run_client, start_clients  # noqa: E402


def variant(base: Path, dest: Path, i: int) -> Path:
    """The ReLU example with kernel source of its own (different cache key), the same results."""
    shutil.copytree(base, dest, ignore=shutil.ignore_patterns("model.py", "replay.json"))
    src = dest / "kernels" / "relu.cpp"
    src.write_text(f"// variant {i}: a compile unit of its own\n" + src.read_text())
    return dest


def verdict(out: dict) -> dict:
    res = out.get("result") or {}
    return {"reward": reward_of(out), "error_kind": res.get("error_kind"), "hung": bool(out.get("hung")),
            "evaluator_fault": res.get("error_kind") in ("judge_error", "evaluator") or
            bool((res.get("metadata") or {}).get("evaluator_fault")),
            "others_cpus": (((res.get("metadata") or {}).get("timing_load") or {}).get("candidate") or {})
            .get("others_cpus"),
            "error": (res.get("error") or ("" if res else out.get("stderr") or ""))[:300]}


def run_phase(name: str, args, work: Path, task: Path, sols: list[Path], alone: float | None) -> dict:
    env = env_for(work, f"cache-{name}")
    (work / name).mkdir()
    server = Server(work / name, env)  # its socket in the phase's folder
    server.start("--warm", str(args.warm))
    try:
        cmds = [kag("score", "--backend", "cpu", "--task", str(task), "--solution", str(s), "--json",
                    "--num-timed", str(args.num_timed), "--server", server.socket) for s in sols]
        t0 = time.perf_counter()
        outs = collect(start_clients(cmds, env), args.timeout)
        wall = time.perf_counter() - t0
    finally:
        server.kill()
    verdicts = [verdict(o) for o in outs]
    blamed = [v for v in verdicts if v["error_kind"] == "build" and not v["evaluator_fault"]]
    faults = [v for v in verdicts if v["evaluator_fault"]]
    hung = [v for v in verdicts if v["hung"]]
    wrong = [v for v in verdicts if alone is not None and not v["evaluator_fault"] and v["reward"] != alone]
    p50, p99 = latencies(outs)
    return {"phase": name, "n": len(sols), "ok": not blamed and not hung and not wrong, "alone": alone,
            "rewards": [v["reward"] for v in verdicts], "build_blamed": len(blamed), "evaluator_faults": len(faults),
            "hung": len(hung), "wrong": len(wrong), "wall_s": round(wall, 1), "p50_s": round(p50, 1),
            "p99_s": round(p99, 1), "errors": sorted({v["error"] for v in verdicts if v["error"]})[:5],
            "others_cpus_while_timed": [v["others_cpus"] for v in verdicts]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--phases", default="same,different")
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--num-timed", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--work")
    ap.add_argument("--out")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="kag-busy-builds-"))
    work.mkdir(parents=True, exist_ok=True)
    task, base = EX / "relu" / "cpu" / "model.py", EX / "relu" / "cpu"
    t0 = time.perf_counter()
    alone_out = run_client(kag("score", "--backend", "cpu", "--task", str(task), "--solution", str(base), "--json",
                               "--num-timed", str(args.num_timed)), env_for(work, "cache-alone"), args.timeout)
    alone = reward_of(alone_out)
    print(f"alone: reward {alone} in {time.perf_counter() - t0:.1f} s", flush=True)
    rows = []
    for phase in args.phases.split(","):
        sols = [base] * args.n if phase == "same" else \
            [variant(base, work / "variants" / f"v{i}", i) for i in range(args.n)]
        row = run_phase(phase, args, work, task, sols, alone)
        print(json.dumps(row), flush=True)
        rows.append(row)
    load = os.getloadavg()
    lines = [f"machine: {os.cpu_count()} CPUs, load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; "
             f"alone: reward {alone}", "",
             "| phase | n | ok | rewards | blamed on the solution's build | evaluator faults | hung | wrong | "
             "wall s | p50 s | p99 s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        counts = {str(x): r["rewards"].count(x) for x in dict.fromkeys(r["rewards"])}
        lines.append(f"| {r['phase']} | {r['n']} | {'yes' if r['ok'] else 'NO'} | "
                     f"{', '.join(f'{k} x{v}' for k, v in counts.items())} | {r['build_blamed']} | "
                     f"{r['evaluator_faults']} | {r['hung']} | {r['wrong']} | {r['wall_s']} | {r['p50_s']} | "
                     f"{r['p99_s']} |")
        lines += [f"  - {r['phase']} error: {e}" for e in r["errors"]]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
