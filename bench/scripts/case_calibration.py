"""One corpus case (tests/adversarial) timed N times, static guards off, each with a fresh baseline
cache (eager timed afresh), printing a line a run: speed-up, reward, the null base's bound and
what it came from, both sides' windows and null windows, the load.

Needs: kag installed with its test extra, a C++ compiler (the CPU backend). Writes each run's result
(JSON) to --out when given.

    python3 bench/scripts/case_calibration.py --case pad_null_windows_python --runs 8
    python3 bench/scripts/case_calibration.py --case example_relu --runs 4 --out /tmp/relu
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def one_run(name: str, backend: str) -> dict:
    from tests.adversarial.cases import cases
    from tests.adversarial.conftest import guard_plugins
    from tests.adversarial.runner import run_case

    case = next(c for c in cases(backend) if c.name == name)
    result = run_case(case, guard_plugins(), do_timing=True, static_guards=False)
    return {"speedup": result.speedup_vs_eager, "reward": result.reward.value if result.reward else None,
            "error": result.error, "metadata": result.metadata}


def line(k: int, run: dict) -> str:
    cal = run["metadata"].get("calibration") or {}
    eager = (cal.get("baselines") or {}).get("eager") or {}
    load = ((run["metadata"].get("timing_load") or {}).get("candidate") or {}).get("loadavg_1m")
    return (f"{k} speedup {run['speedup'] and round(run['speedup'], 3)} reward {run['reward']} "
            f"cap {cal.get('null_base_cap_ms')} baseline nulls {cal.get('baseline_null_windows_ms')} "
            f"runner null {cal.get('runner_null_window_ms')} | eager window/null {eager.get('window_ms')} "
            f"{eager.get('null_window_ms')} | candidate window/null {cal.get('window_ms')} {cal.get('null_window_ms')} "
            f"| gaps {cal.get('pause_ms')} runner {cal.get('runner_pause_ms')} | load {load}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a run in this process, as JSON
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_run(args.case, args.backend), default=str))
        return
    for k in range(1, args.runs + 1):  # a process each: a fresh cache, and no judge kept warm between runs
        env = dict(os.environ, KAG_CACHE_DIR=tempfile.mkdtemp(prefix="kag-case-cache-"))
        done = subprocess.run([sys.executable, __file__, "--one", "--case", args.case, "--backend", args.backend],
                              env=env, capture_output=True, text=True)
        if done.returncode != 0 or not done.stdout.strip():
            print(f"{k} failed: {done.stderr.strip()[-400:]}", flush=True)
            continue
        run = json.loads(done.stdout.strip().splitlines()[-1])
        print(line(k, run), flush=True)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{args.case}-{k}.json").write_text(json.dumps(run))


if __name__ == "__main__":
    main()
