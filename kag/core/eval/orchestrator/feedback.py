"""Short human-readable reports an agent (or a person) can act on: builds and evaluations."""

from __future__ import annotations

from typing import Any

from kag.core.records import EvalResult


def format_build(result: Any, backend_name: str) -> str:
    """What compile.sh prints: verdict, seconds, files compiled vs cached, trimmed errors."""
    verdict = "ok" if result.ok else "FAILED"
    lines = [f"build {verdict} ({backend_name}) in {result.seconds:.2f} s: "
             f"{len(result.compiled)} compiled, {len(result.cached)} cached"
             + (f", {len(result.failed)} failed" if result.failed else "")]
    if result.compiled:
        lines.append("compiled: " + " ".join(result.compiled))
    if result.failed:
        lines.append("failed: " + " ".join(result.failed))
    if result.log:
        lines.append(result.log)
    return "\n".join(lines)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def describe_baseline(info: Any) -> str:
    """Where a baseline's time came from, from ``report["baseline_cache"][name]``
    (kag.core.eval.orchestrator.baseline_cache.BaselineCache.obtain): "cached 3 h ago, 100 runs" or "timed now"."""
    if not isinstance(info, dict):  # results written before the cache recorded its sources
        return "cached" if info == "hit" else "timed now"
    runs = f"{info.get('runs')} runs"
    if info.get("source") == "cache":
        return f"cached {_age(float(info.get('age_s') or 0))} ago, {runs}"
    if info.get("retimed"):
        return f"re-timed after the candidate, under its load; kept the {info['retimed'].get('kept')} timing, {runs}"
    if info.get("status") == "loaded":
        return f"timed now, {runs}; not cached: timed under load"
    if info.get("status") == "unsettled":
        return (f"timed now, {runs}; not cached: IQR {info.get('iqr_pct')}% of the median "
                f"after {info.get('attempts')} attempts")
    attempts = info.get("attempts") or 1
    return f"timed now, {runs}" + (f", settled after {attempts} attempts" if attempts > 1 else "")


def format_eval(result: EvalResult) -> str:
    """Verdict, violations, the first error, times, speed-ups and reward."""
    unchecked = result.metadata.get("checks") == "skipped"  # kag profile
    if unchecked:
        verdict = "FAIL" if result.error else "TIMED (correctness not checked: kag verify checks it)"
    else:
        verdict = "PASS" if result.ok else "FAIL"
    name = result.device.get("name")  # none when the judge never ran (a build failure)
    lines = [f"task {result.task} [{result.backend}{f' on {name}' if name else ''}]: {verdict}",
             f"  compiled: {result.compiled}   correct: {'not checked' if unchecked else result.correct}"]
    lines += [f"  violation [{v.guard}]: {v.detail}" for v in result.violations]
    if result.error:
        lines.append(f"  error ({result.error_kind}): {result.error}")
    cache = result.metadata.get("baseline_cache", {})
    for name in ("candidate", "eager", "compile"):
        stats = result.timing.get(name)
        if stats is not None:
            note = f"  ({describe_baseline(cache[name])})" if name in cache else ""
            lines.append(f"  {name:>9}: {stats.median_ms:.4f} ms median (IQR {stats.iqr_ms:.4f}, n={stats.n}){note}")
    load = result.metadata.get("timing_load", {}).get("candidate")
    if load:
        lines.append(f"  timed with {load.get('others_cpus')} of {load.get('cpus')} CPUs busy with other work, "
                     f"after {load.get('wait_s')} s waiting for the {load.get('slot')} timing slot"
                     + ("" if load.get("locked") else " (not had: timed alongside another timing)"))
    if result.speedup_vs_eager is not None:
        lines.append(f"  speedup vs eager: {result.speedup_vs_eager:.3f}x")
    if result.speedup_vs_compile is not None:
        lines.append(f"  speedup vs compile: {result.speedup_vs_compile:.3f}x  (target: time <= 0.95x compile)")
    if result.peak_memory_mb is not None:
        lines.append(f"  peak memory: {result.peak_memory_mb:.1f} MB")
    if result.reward is not None:
        lines.append(f"  reward ({result.reward.name}): {result.reward.value:g}")
    lines += [f"  note: {note}" for note in result.metadata.get("notes", [])]
    return "\n".join(lines)
