"""The lazy-output attack and honest solutions of the same task through the judge, several times
each, with the hand-over figures behind each verdict (kag.core.eval.judge.judge_timing: the fold).

    python3 bench/scripts/fold_check.py --repeat 3 [--cases lazy_output_harness,example_relu,tiny_honest]
Prints one JSON line per evaluation and a table; run on a GPU (the CPU has no hand-over).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="lazy_output_harness,example_relu,tiny_honest,example_sigmoid")
    args = ap.parse_args()
    from kag.core.plugins import Plugins
    from tests.adversarial.cases import CASES
    from tests.adversarial.runner import run_case

    wanted = args.cases.split(",")
    cases = sorted((c for c in CASES if c.name in wanted and c.backend == "cuda"), key=lambda c: wanted.index(c.name))
    plugins = Plugins()
    rows = []
    for case in cases:
        for i in range(args.repeat):
            r = run_case(case, plugins, do_timing=True)
            cal = r.metadata.get("calibration") or {}
            row = {"case": f"{case.name}-cuda", "try": i + 1, "reward": r.reward, "speedup_vs_eager": r.speedup_vs_eager,
                   "candidate_ms": r.times_ms.get("candidate"), "error": (r.error or "")[:80],
                   "violations": [str(getattr(v, "detail", v))[:80] for v in r.violations],
                   **{k: cal.get(k) for k in ("window_ms", "post_ms", "post_calibrated_ms", "fold_ms",
                                              "fold_threshold_ms")}}
            print(json.dumps(row, default=str), flush=True)
            rows.append(row)
    print("\n| case | try | reward | x eager | candidate ms | window ms | hand-over ms | calibrated ms | fold ms | threshold ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['try']} | {r['reward']} | {r['speedup_vs_eager']} | {r['candidate_ms']} | {r['window_ms']} "
              f"| {r['post_ms']} | {r['post_calibrated_ms']} | {r['fold_ms']} | {r['fold_threshold_ms']} |")


if __name__ == "__main__":
    main()
