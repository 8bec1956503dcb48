"""Score every example solution (examples/*/cuda) against its KernelBench task on the GPU.

Prints a table (example, task, correct, candidate/eager/compile ms, speed-ups, reward) and writes
JSON to $OUT if set. KernelBench tasks come from $KAG_KERNELBENCH (else the bundled sample).
Usage: python bench/scripts/examples.py [NAME ...] [--num-checks N] [--repeat K]
(--num-checks: correctness checks per evaluation, default 5; --repeat: evaluations per example, each
on new secret inputs; notes such as near misses settled by the float64 reference are printed)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--num-checks", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    names = args.names
    from kag.core.plugins import Plugins
    from kag.core.records import Task

    kernelbench = Path(os.environ.get("KAG_KERNELBENCH", REPO / "examples" / "kernelbench_sample"))
    plugins = Plugins()
    rows = []
    examples = sorted(p for p in (REPO / "examples").iterdir() if (p / "task.txt").exists() and (p / "cuda").is_dir())
    for ex in examples:
        if names and ex.name not in names:
            continue
        rel = (ex / "task.txt").read_text().strip()
        path = kernelbench / rel
        task = Task(name=rel.removesuffix(".py"), source="kernelbench", code=path.read_text(), path=str(path))
        for _ in range(args.repeat):
            rows.append(score(ex, task, plugins, args.num_checks))
    print(f"\n{'example':<24} {'task':<44} {'ok':<5} {'cand ms':>9} {'eager ms':>9} {'compile ms':>10} "
          f"{'vs eager':>8} {'vs comp':>8} {'reward':>6}")
    for r in rows:
        t = r["times_ms"]
        f = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
        s = lambda x: "-" if x is None else f"{x:.2f}x"  # noqa: E731
        print(f"{r['example']:<24} {r['task']:<44} {str(r['ok']):<5} {f(t.get('candidate')):>9} {f(t.get('eager')):>9} "
              f"{f(t.get('compile')):>10} {s(r['speedup_vs_eager']):>8} {s(r['speedup_vs_compile']):>8} "
              f"{r['reward'] if r['reward'] is not None else '-':>6}")
        if r["error"] or r["violations"]:
            print(f"    {r['error'] or ''} {r['violations'] or ''}"[:400])
        for note in r["notes"]:
            print(f"    note: {note}"[:300])
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "examples.json").write_text(json.dumps(rows, indent=2, default=str))
    return 0


def score(ex: Path, task: Any, plugins: Any, num_checks: int) -> dict:
    from kag.core.eval.orchestrator.evaluate import EvalOptions, evaluate
    from kag.core.records import to_dict
    from kag.core.agent.workspace import read_solution

    r = evaluate(task, read_solution(ex / "cuda"), EvalOptions(backend="cuda", num_checks=num_checks), plugins)
    row = {"example": ex.name, "task": task.name, "ok": r.ok, "error": r.error,
           "violations": [to_dict(v) for v in r.violations], "times_ms": r.times_ms,
           "speedup_vs_eager": r.speedup_vs_eager, "speedup_vs_compile": r.speedup_vs_compile,
           "reward": r.reward.value if r.reward else None, "peak_memory_mb": r.peak_memory_mb,
           "device": r.device.get("name"), "seconds": r.durations_s.get("total"),
           "notes": [n for n in r.metadata.get("notes", []) if "build cache" not in n]}
    print(json.dumps(row, default=str), flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
