"""Run every CUDA case of the adversarial corpus (tests/adversarial/cases.py) through the real
evaluator on this machine's GPU and print a table: case, expected, got, ok.

    python bench/scripts/adversarial.py [--only NAME,...] [--no-timing] [--cpu] [--shard K/N] [--jobs J]
                                [--no-static-guards] [--family]

Every case goes through ``tests.adversarial.runner.run_case``: the same ``kag.core.eval.orchestrator.evaluate`` wiring
(static guards, build, judge, runtime guards in the candidate, re-checked timed iterations) that the
CPU tests use; it refuses to run until ``kag.core.eval.orchestrator.evaluate.RUNTIME_GUARDS_WIRED`` is set.
Writes adversarial.json (every row plus the device) and adversarial.md (the table) to $OUT when it
is set (adversarial_no_static.* with ``--no-static-guards``: every guard's source check off, so
every verdict comes from the runtime defences alone; a case then passes when it fails (-1) or gets
only the speed it really has, as ``Case.no_static_outcomes`` says). Exit status 1 when any case
gets the wrong verdict. After each fault, GPU memory in use is
checked to be back where it was (the column ``mem_mb`` is the change in device memory in use; only
with --jobs 1). ``--shard K/N`` runs every N-th case from the K-th (1-based), to stay under a
per-command time limit; ``--jobs J`` builds J solutions at once (the GPU is still used by one
evaluation at a time: kag's GPU pool holds it exclusively while checking and timing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.adversarial.cases import cases  # noqa: E402
from tests.adversarial.conftest import guard_plugins  # noqa: E402
from tests.adversarial.runner import describe, evaluator_ready, matches, run_case  # noqa: E402


def used_mb() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
    except Exception:  # noqa: BLE001 - no NVML: no memory column
        return None


def markdown(rows: list[dict], device: str, backend: str) -> str:
    """The committed form of the table (adversarial*.md in bench/results/*/)."""
    right = sum(r["ok"] for r in rows)
    fp = sum(r["honest"] and not r["ok"] for r in rows)
    lines = [f"# Adversarial corpus ({backend}) on {device}", "",
             f"{right}/{len(rows)} verdicts right; false positives: {fp}", "",
             "| case | family | expected | got | ok |", "|---|---|---|---|---|"]
    for r in rows:
        got = r["got"].replace("|", "\\|").replace("\n", " ")[:200]
        lines.append(f"| {r['case']} | {r.get('family', '')} | {r['expected'].replace('|', '/')} | {got} | "
                     f"{'yes' if r['ok'] else 'NO'} |")
    return "\n".join(lines) + "\n"


WINDOW_KEYS = ("calls_per_window", "calls_per_short_window", "window_ms", "short_window_ms", "null_window_ms",
               "window_end_ms", "intercept_ms")


def windows_of(result: Any) -> dict | None:
    """The windows each side was timed with (from the judge's calibration), where it timed any."""
    cal = getattr(result, "metadata", {}).get("calibration") if result is not None else None
    if not cal or "calls_per_window" not in cal:
        return None
    sides = {"candidate": cal, **(cal.get("baselines") or {})}
    return {side: {k: c.get(k) for k in WINDOW_KEYS} for side, c in sides.items()}


def samples_of(result: Any) -> dict | None:
    """The CPU provenance's raw counts (the judge's ``observed["cpu_samples"]``) and the times they are
    read against, where the judge sampled any."""
    observed = getattr(result, "metadata", {}).get("observed") if result is not None else None
    if not observed or "cpu_samples" not in observed:
        return None
    return {**observed["cpu_samples"], "times_ms": dict(getattr(result, "times_ms", {}) or {})}


def write_tables(rows: list[dict], backend: str, static: bool) -> None:
    """adversarial[_no_static].{json,md} in $OUT (rewritten after every case: a run cut short by a
    time limit still leaves its table)."""
    out = os.environ.get("OUT")
    if not out:
        return
    Path(out).mkdir(parents=True, exist_ok=True)
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    stem = "adversarial" if static else "adversarial_no_static"
    fps = sum(r["honest"] and not r["ok"] for r in rows)
    Path(out, f"{stem}.json").write_text(json.dumps({"device": device, "backend": backend, "rows": rows,
                                                     "static_guards": static, "false_positives": fps}, indent=1))
    Path(out, f"{stem}.md").write_text(markdown(rows, device, backend + ("" if static else ", static guards off")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma list of case names")
    parser.add_argument("--no-timing", action="store_true", help="skip the timed phase (faster)")
    parser.add_argument("--cpu", action="store_true", help="run the CPU twins instead")
    parser.add_argument("--force", action="store_true", help="run even if the runtime guards are not wired")
    parser.add_argument("--shard", default="1/1", help="K/N: run cases K, K+N, K+2N, ... (1-based)")
    parser.add_argument("--jobs", type=int, default=1, help="evaluations in flight (builds overlap)")
    parser.add_argument("--no-static-guards", action="store_true", help="switch off every guard's source check")
    parser.add_argument("--family", action="store_true", help="only the attack families (attacks on the measurement and the isolation, "
                        "each by several routes: the cases with a family)")
    parser.add_argument("--static-relevant", action="store_true",
                        help="only the cases a static guard can see (static cases and the families): the others' "
                             "sources pass every static check (tests/adversarial/test_static_cases.py), so "
                             "switching the static guards off changes nothing for them")
    args = parser.parse_args()
    k, _, n = args.shard.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        parser.error(f"--shard takes K/N with 1 <= K <= N, got {args.shard!r}")
    reason = evaluator_ready()
    if reason and not args.force:
        print(f"not running: {reason}", file=sys.stderr)
        return 2
    backend = "cpu" if args.cpu else "cuda"
    only = {n for n in args.only.split(",") if n}
    static = not args.no_static_guards
    selected = [c for c in cases(backend) if (not only or c.name in only) and (c.family or not args.family)
                and (c.family or c.static or not args.static_relevant)]
    selected = selected[int(k) - 1::int(n)]
    plugins = guard_plugins()
    rows = []
    base = used_mb()
    print(f"{'case':34s} {'expected':28s} {'ok':5s} {'s':>6s} {'mem_mb':>7s}  got")

    def run_one(case):  # noqa: ANN001, ANN202
        start = time.perf_counter()
        result = None
        try:
            result = run_case(case, plugins, do_timing=not args.no_timing, static_guards=static)
            ok, got = matches(case, result, static_guards=static), describe(result, case)
        except Exception as exc:  # noqa: BLE001 - the evaluator itself failed: a wrong verdict
            ok, got = False, f"evaluator raised {type(exc).__name__}: {exc}"
        return case, ok, got, time.perf_counter() - start, windows_of(result), samples_of(result)

    if backend == "cuda":  # judges started ahead of need, as in an agent episode or kag eval
        from kag.core.eval.orchestrator.judge_process import keep_judges_warm

        keep_judges_warm(max(1, args.jobs))
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for case, ok, got, seconds, windows, samples in pool.map(run_one, selected):
            now = used_mb() if args.jobs <= 1 else None
            delta = None if now is None or base is None else round(now - base, 1)
            expected = case.expect + (f" ({case.detail})" if case.detail else "")
            if not static:
                expected = " or ".join(o if o != "same" else expected for o in case.no_static_outcomes)
            rows.append({"case": case.id, "family": case.family, "expected": expected, "got": got, "ok": ok,
                         "seconds": round(seconds, 2), "gpu_mem_delta_mb": delta, "honest": case.honest,
                         "windows": windows, "cpu_samples": samples})
            print(f"{case.id:34s} {expected[:28]:28s} {str(ok):5s} {seconds:6.1f} "
                  f"{'' if delta is None else delta:>7}  {got[:120]}", flush=True)
            write_tables(rows, backend, static)
    if args.jobs > 1 and base is not None:
        from kag.core.eval.orchestrator.judge_process import keep_judges_warm

        keep_judges_warm(0)
        time.sleep(3)
        after = used_mb()
        if after is not None:
            print(f"GPU memory in use after every case: {after - base:+.0f} MB vs before the first "
                  f"(judges kept warm hold no GPU memory)")
    wrong = [r for r in rows if not r["ok"]]
    false_positives = [r for r in rows if r["honest"] and not r["ok"]]
    print(f"\n{len(rows) - len(wrong)}/{len(rows)} verdicts right; false positives: {len(false_positives)}")
    write_tables(rows, backend, static)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
