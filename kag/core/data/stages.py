"""The stages of ``kag data``: each reads the previous stage's file, writes its own, and resumes.

A stage marked complete in ``manifest.json`` with the same parameters is skipped; an unfinished
one keeps the records it already wrote and does only the rest.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Iterator

import attrs

from kag.core.contracts import DecontamFilter
from kag.core.plugins import Plugins
from kag.core.records import append_jsonl, from_dict, read_jsonl
from kag.core.data.synthesis import ComposedTask, ComposeError, Manifest, Seed, SynthesisError, allocate, count_reasons

FILES = {"crawl": "seeds.jsonl", "compose": "composed.jsonl", "filter": "filtered.jsonl",
         "decontam": "clean.jsonl", "output": "data.parquet"}


@contextlib.contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Any]:
    """A rich progress display (or a stand-in that does nothing when disabled)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not enabled:
        class _Quiet:
            def add_task(self, *a: Any, **k: Any) -> int:
                return 0

            def update(self, *a: Any, **k: Any) -> None:
                pass

            def advance(self, *a: Any, **k: Any) -> None:
                pass
        yield _Quiet()
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[note]}")) as bar:
        yield bar


def _check_params(manifest: Manifest, stage: str, params: dict[str, Any]) -> bool:
    """True when the stage is already done with these parameters; an error when done with others."""
    if manifest.is_complete(stage, params):
        return True
    st = manifest.data["stages"].get(stage, {})
    if st.get("complete"):
        raise SynthesisError(f"{manifest.path}: stage {stage} was finished with other parameters "
                             f"({st.get('params')}); use a new --out folder or delete {FILES[stage]} and its "
                             f"manifest entry to redo it")
    return False


def _rewrite(path: Path, records: list[Any]) -> None:
    """A stage's file written afresh, line by line (``append_jsonl``)."""
    path.unlink(missing_ok=True)
    append_jsonl(path, *records)


def load_seeds(path: Path) -> list[Seed]:
    if not path.exists():
        raise SynthesisError(f"{path} does not exist; run `kag data crawl --out {path.parent}` first")
    return [from_dict(Seed, r) for r in read_jsonl(path)]


def crawl(plugins: Plugins, out: Path, manifest: Manifest, crawlers: list[str], bar: Any,
          options: dict[str, dict[str, Any]] | None = None) -> list[Seed]:
    """``options``: per crawler name, its constructor options (kag.toml ``[crawlers.NAME]``)."""
    options = {name: dict((options or {}).get(name, {})) for name in crawlers}
    params = {"crawlers": crawlers, "options": options}
    if _check_params(manifest, "crawl", params) and out.exists():
        return load_seeds(out)
    start, seeds, report = time.perf_counter(), [], {}
    task = bar.add_task("crawl", total=len(crawlers), note="")
    for name in crawlers:
        bar.update(task, note=name)
        result = plugins.create("crawler", name, **options[name]).crawl()
        seeds += result.seeds
        report[name] = {"found": result.found, "instantiated": len(result.seeds), "failed": len(result.failed),
                        "skipped": len(result.skipped), "failed_reasons": count_reasons(result.failed.values()),
                        "skipped_reasons": count_reasons(result.skipped.values()),
                        "failures": result.failed, "skips": result.skipped}
        bar.advance(task)
    _rewrite(out, seeds)
    manifest.update("crawl", complete=True, params=params, file=out.name, seeds=len(seeds), crawlers=report,
                    elapsed_s=round(time.perf_counter() - start, 2))
    return seeds


def compose(plugins: Plugins, seeds: list[Seed], out: Path, manifest: Manifest, composer_name: str,
            composer_opts: dict[str, Any], n: int, mix: dict[str, float], seed: int, bar: Any,
            retries: int = 3) -> list[dict[str, Any]]:
    have_tf = any(s.source.startswith("transformers") for s in seeds)
    dropped_buckets = [b for b in mix if b == "transformers" and not have_tf and mix[b] > 0]
    if dropped_buckets:  # no transformers seeds (not installed): spread its share over the torch buckets
        rest = {b: w for b, w in mix.items() if b not in dropped_buckets}
        if not sum(rest.values()):
            raise SynthesisError("the mix asks only for transformers tasks but no transformers seeds were crawled")
        mix = {b: w / sum(rest.values()) for b, w in rest.items()}
    composer = plugins.create("composer", composer_name, **composer_opts)
    params = {"composer": composer_name, "composer_params": composer.params(), "n": n, "mix": mix, "seed": seed}
    if _check_params(manifest, "compose", params) and out.exists():
        return read_jsonl(out)
    start = time.perf_counter()
    rejects_path = out.with_name("compose_rejects.jsonl")
    done = {r["id"]: r for r in read_jsonl(out)}
    slots_done = {r["slot"] for r in read_jsonl(rejects_path) if r.get("final")} | {r["made_by"]["slot"] for r in done.values()}
    seen = {r["code"] for r in done.values()}
    buckets = allocate(n, mix)
    task = bar.add_task(f"compose ({composer_name})", total=n, completed=len(slots_done), note="")
    append_jsonl(out)  # the stage's files exist even when it writes nothing
    append_jsonl(rejects_path)
    for slot, bucket in enumerate(buckets):
        if slot in slots_done:
            continue
        for attempt in range(retries):
            index = slot + attempt * n
            try:
                cand: ComposedTask = composer.compose(seeds, bucket, index, seed)
                if cand.code in seen:
                    raise ComposeError("duplicate of an earlier task")
            except ComposeError as exc:
                append_jsonl(rejects_path, {"slot": slot, "bucket": bucket, "attempt": attempt,
                                            "reason": str(exc), "final": attempt == retries - 1})
                continue
            cand.made_by["slot"] = slot
            seen.add(cand.code)
            append_jsonl(out, cand)
            break
        bar.advance(task)
    records = read_jsonl(out)
    rejects = read_jsonl(rejects_path)
    manifest.update("compose", complete=True, params=params, file=out.name, requested=n, composed=len(records),
                    mix_note="transformers share moved to torch buckets: no transformers seeds" if dropped_buckets else None,
                    slots_failed=sum(1 for r in rejects if r.get("final")),
                    attempt_reasons=count_reasons(r["reason"] for r in rejects),
                    per_source=count_reasons(r["data_source"] for r in records),
                    elapsed_s=round(time.perf_counter() - start, 2))
    return records


RETRIED_REASONS = ("timeout", "worker_crash")  # the filter's verdicts a rerun checks once more


def latest_rejects(path: Path, kept: set[str]) -> list[dict[str, Any]]:
    """Each rejected task's last verdict (a retried task has two lines), none for a task kept later."""
    last = {r["id"]: r for r in read_jsonl(path)}
    return [r for key, r in last.items() if key not in kept]


def exec_filter(plugins: Plugins, candidates: list[dict[str, Any]], out: Path, manifest: Manifest,
                filter_opts: dict[str, Any], bar: Any, executor: Any = None, name: str = "exec") -> list[dict[str, Any]]:
    """``name``: the ExecutionFilter plugin, made with ``filter_opts``. ``executor`` other than
    ``local``: the checks run on its workers (the filter's ``run_on``, which the built-in has); tasks
    whose job it lost stay unchecked (counted) and a rerun checks them."""
    remote = executor is not None and executor.name != "local"
    filt = plugins.create("filter", name, **filter_opts, **({"here": False} if remote else {}))
    if remote and not hasattr(filt, "run_on"):
        raise SynthesisError(f"the filter {name!r} runs only on this machine (it has no run_on(executor, items)); "
                         f"drop --executor/--ray-address or use --filter exec")
    params = {k: v for k, v in filt.params().items() if k != "workers"}
    if name != "exec":  # another filter's verdicts are not the built-in's: the folder's filter is a parameter
        params["filter"] = name
    if _check_params(manifest, "filter", params) and out.exists():
        return read_jsonl(out)
    rejects_path = out.with_name("filter_rejects.jsonl")
    kept = {r["id"] for r in read_jsonl(out)}
    rejects = latest_rejects(rejects_path, kept)
    # a timeout or a crashed worker may be the machine's doing: checked once more on a rerun, then final
    again = {r["id"]: r for r in rejects if r.get("reason") in RETRIED_REASONS and not r.get("final")}
    decided = kept | {r["id"] for r in rejects if r["id"] not in again}
    todo = [c for c in candidates if c["id"] not in decided]
    by_id = {c["id"]: c for c in candidates}
    where = f"{executor.name} executor" if remote else f"x{len(filt.slots)}"
    task = bar.add_task(f"filter ({filt.device} {where})", total=len(candidates),
                        completed=len(candidates) - len(todo), note="")
    prev = manifest.stage("filter")
    prev_checked, prev_s = (prev.get("checked", 0), prev.get("elapsed_s", 0.0)) if todo != candidates else (0, 0.0)
    start, checked, unchecked = time.perf_counter(), 0, 0

    def record(**extra: Any) -> None:
        elapsed = prev_s + time.perf_counter() - start
        kept = read_jsonl(out)
        rejects = latest_rejects(rejects_path, {r["id"] for r in kept})
        workers = executor.stats.workers if remote else len(filt.slots)
        if remote:
            extra = {"executor": attrs.asdict(executor.stats), "unchecked": unchecked, **extra}
        manifest.update("filter", params=params, workers=workers, file=out.name, candidates=len(candidates),
                        kept=len(kept), rejected=len(rejects),
                        reasons=count_reasons(r["reason"] for r in rejects), checked=prev_checked + checked,
                        elapsed_s=round(elapsed, 2),
                        throughput_tasks_per_min=round((prev_checked + checked) / elapsed * 60, 2) if elapsed else None,
                        **extra)

    append_jsonl(out)  # the stage's files exist even when it writes nothing
    append_jsonl(rejects_path)
    items = [(c["id"], c["code"]) for c in todo]
    for key, verdict in (filt.run_on(executor, items) if remote else filt.run(items)):
        if verdict is None:  # the executor lost its job: neither kept nor rejected
            unchecked += 1
            bar.advance(task)
            continue
        checked += 1
        rec = by_id[key]
        if verdict["ok"]:
            append_jsonl(out, {**rec, "filter": verdict})
        else:
            if key in again:  # the second attempt decides, and says what the first one met
                verdict = {**verdict, "final": True, "detail": f"{verdict.get('detail', '')} (first attempt: "
                                                               f"{again[key]['reason']}: {again[key].get('detail', '')})"}
            elif verdict.get("reason") not in RETRIED_REASONS:
                verdict = {**verdict, "final": True}
            append_jsonl(rejects_path, {"id": key, "ops": rec["ops"], "data_source": rec["data_source"], **verdict})
        bar.update(task, note=f"{checked / (time.perf_counter() - start) * 60:.1f} tasks/min")
        bar.advance(task)
        if checked % 10 == 0:
            record(complete=False)
    pending = [r for r in latest_rejects(rejects_path, {r["id"] for r in read_jsonl(out)}) if not r.get("final")]
    record(complete=not unchecked and not pending, retry_on_rerun=len(pending))
    records = read_jsonl(out)
    return records


def decontaminate(plugins: Plugins, tasks: list[dict[str, Any]], out: Path, manifest: Manifest,
                  reference: list[tuple[str, str]] | None, against: str | None, threshold: float,
                  bar: Any, name: str = "decontam", options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``name``: the DecontamFilter plugin, made with ``threshold`` and ``options`` (kag.toml's
    ``[filters.NAME]``); another filter's verdicts are not the built-in's, so its name is a parameter."""
    params: dict[str, Any] = {"against": against, "threshold": threshold}
    params.update({"method": "op_graph+ast+numeric"} if name == "decontam" else {"filter": name, **(options or {})})
    if _check_params(manifest, "decontam", params) and out.exists():
        return read_jsonl(out)
    start = time.perf_counter()
    dec = plugins.create("filter", name, **{**(options or {}), "threshold": threshold})
    if not isinstance(dec, DecontamFilter):
        raise SynthesisError(f"the filter {name!r} is not a decontamination filter (kag.plugin.DecontamFilter: "
                             f"reference, add_reference, score, keep, write_report); choose one with --decontam NAME "
                             f"(`kag plugins`)")
    task = bar.add_task("decontam", total=len(tasks), note="tracing the reference tasks")
    dec.add_reference(reference or [])
    bar.update(task, note=f"{len(dec.reference)} reference tasks")
    kept, dropped, scores = [], [], []
    for rec in tasks:
        score, verdict = 0.0, {"closest": None}
        if dec.reference and hasattr(dec, "judge"):  # which signal matched, for the rejects file
            v = dec.judge(rec["code"])
            score, verdict = v.score, {"closest": v.closest, "signal": v.signal, "note": v.note}
        elif dec.reference:
            score, match = dec.score(rec["code"])
            verdict = {"closest": match}
        verdict = {"similarity": round(score, 4), **verdict}
        scores.append(score)
        rec = {**rec, "decontam": verdict}
        (kept if dec.keep(score) else dropped).append(rec)
        bar.advance(task)
    _rewrite(out, kept)
    _rewrite(out.with_name("decontam_rejects.jsonl"),
             [{"id": rec["id"], "ops": rec["ops"], "reason": "similar_to_benchmark", **rec["decontam"]}
              for rec in dropped])
    dec.write_report(scores, out.parent, {"against": against})
    manifest.update("decontam", complete=True, params=params, file=out.name, checked=len(tasks), kept=len(kept),
                    reasons={"similar_to_benchmark": len(dropped)} if dropped else {},
                    reference_tasks=len(dec.reference), skipped=None if dec.reference else "no --against given",
                    elapsed_s=round(time.perf_counter() - start, 2))
    return kept


def write_output(tasks: list[dict[str, Any]], out: Path, manifest: Manifest) -> Path:
    """``data.parquet`` in the Ops-6K schema: code, ops (list of names), data_source."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"code": [t["code"] for t in tasks], "ops": [list(t["ops"]) for t in tasks],
                      "data_source": [t["data_source"] for t in tasks]})
    tmp = out.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(out)
    manifest.update("output", complete=True, file=out.name, rows=len(tasks),
                    per_source=count_reasons(t["data_source"] for t in tasks))
    return out
