"""Baseline timings cached in ``<cache>/baselines.json``: signed, and only when they settled.

Trusted side (the judge). Keyed by (task code hash, device, torch version, baseline, mode, timed
iterations): the baselines of a task do not change between candidates, and timing torch.compile
costs seconds to minutes. Every reward reuses a cached timing, so an entry is

- believed only if its HMAC (kag.core.trust.integrity, the evaluator's key) verifies over the entry and
  its key: an entry that anything else wrote or moved is ignored, re-timed, and named in a note;
- written only when the timing settled (its median known to ``MEDIAN_ERROR_LIMIT`` of itself: the
  standard error of a median of ``n`` windows whose spread is the IQR) and a second settled timing
  agrees with it (medians within ``AGREE_LIMIT``): a burst of load can make a whole timing slow yet steady (seen on a 2-core
  machine: torch.compile ReLU at 14.4 ms with an IQR of 2.6%, against 0.43 ms), which only a
  timing at another moment shows. A median, not the single windows, is what a reward uses: on the
  2-core CPU machine single windows spread 15-33% (IQR) while three timings' medians agreed within
  3%, and a rule on the IQR never cached a CPU baseline. Timings are re-taken up to ``ATTEMPTS``
  times; if none agree, the lowest median serves this evaluation only (load only ever adds time,
  so it is the closest to the truth and the least generous to the candidate);
- written only when it was timed on a quiet machine: with the device's timing slot held and little
  other work on the CPUs (kag.core.eval.orchestrator.timing_lock). Steady timings under steady load agree with
  each other (eager ReLU measured at 19.9 ms instead of 0.75 ms with 7 other evaluations starting),
  and a cached one would serve every later evaluation.

Each entry records its stats, when it was timed (UTC), how many attempts it took, the conditions
it was timed under and the facts of its key. Writes are atomic (temp file + rename) under an flock so parallel evaluations share it.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Callable

import attrs

from kag.core.trust import integrity
from kag.core.records import TimingStats, from_dict, to_dict

MEDIAN_ERROR_LIMIT = 0.03  # a timing settled: its median's standard error under this fraction of it
AGREE_LIMIT = 0.05  # two settled timings agree: medians within this fraction
ATTEMPTS = 3  # timings of one baseline per evaluation before giving up on settling it
AGREEING = 2  # settled timings whose medians must agree before one is cached (1: the first settled)
MAC_KIND = "baseline"
FORMAT = 2  # entries of format 1 (bare TimingStats, unsigned) are ignored


def default_cache_dir() -> Path:
    """The same root as the build cache (``$KAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/kag``)."""
    from kag.core.eval.orchestrator.build import cache_root

    return cache_root()


@attrs.frozen
class BaselineKey:
    """What a baseline's timing depends on; ``text`` is its key in baselines.json."""

    task_hash: str
    device: str  # the device's name (+ "/<threads>t" on the CPU)
    torch: str
    baseline: str
    mode: str
    num_timed: int

    @property
    def text(self) -> str:
        return cache_key(self.task_hash, self.device, self.torch, self.baseline, self.mode, self.num_timed)


def cache_key(task_hash: str, device_name: str, torch_version: str, baseline: str, mode: str,
              num_timed: int) -> str:
    return "|".join([task_hash, device_name, torch_version, baseline, mode or "-", str(num_timed)])


# how a cached baseline was timed: entries of another method are not reused ("judge-windows": through the
# runner's windows; "steady-heap": the runner forked under kag.core.eval.judge.heap's policy)
BASELINE_METHOD = "judge-windows-observed-after-first-intercept-steady-heap"


def device_key(device: dict[str, Any]) -> str:
    """A judge report's device (kag.core.eval.judge.timing.device_info) as a key: a GPU by its name, a
    CPU by its name and the threads torch used."""
    return str(device.get("name")) + ("" if device.get("type") == "cuda" else f"/{device.get('threads')}t")


def baseline_key(task_hash: str, device: dict[str, Any], torch_version: str, baseline: str, mode: str,
                 num_timed: int) -> BaselineKey:
    """The key a judge reads and writes a baseline under (and a sandbox that records a container's
    timing for the next ones: kag.plugins.sandboxes.docker_eval)."""
    return BaselineKey(task_hash, device_key(device), torch_version, baseline, f"{mode}|{BASELINE_METHOD}", num_timed)


def median_error_ms(stats: TimingStats) -> float:
    """The standard error of the median of ``stats.n`` windows (the IQR / 1.349 estimates their
    spread; 1.2533 / sqrt(n) a median's share of it)."""
    return 1.2533 * (stats.iqr_ms / 1.349) / max(stats.n, 1) ** 0.5


def settled(stats: TimingStats) -> bool:
    """Worth caching: a positive median known to ``MEDIAN_ERROR_LIMIT`` of itself."""
    return stats.median_ms > 0 and median_error_ms(stats) < MEDIAN_ERROR_LIMIT * stats.median_ms


def agree(a: TimingStats, b: TimingStats) -> bool:
    """Two settled timings whose medians differ by under ``AGREE_LIMIT`` of the lower one (timings
    at two moments differ by more than their medians' errors, and that is not a burst of load)."""
    low = min(a.median_ms, b.median_ms)
    return settled(a) and settled(b) and abs(a.median_ms - b.median_ms) < AGREE_LIMIT * low


def _agreed(tries: list[TimingStats]) -> TimingStats | None:
    """The timing to cache once the latest of ``tries`` agrees with ``AGREEING - 1`` earlier ones
    (the lowest median of those), else None."""
    latest = tries[-1]
    if not settled(latest):
        return None
    group = [latest] + [s for s in tries[:-1] if agree(s, latest)]
    return min(group, key=lambda s: s.median_ms) if len(group) >= AGREEING else None


def spread(stats: TimingStats) -> float:
    """The IQR as a fraction of the median (inf for a zero median)."""
    return stats.iqr_ms / stats.median_ms if stats.median_ms > 0 else float("inf")


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@attrs.define
class CachedBaseline:
    """A verified entry of baselines.json; ``age_s`` is its age when it was read."""

    stats: TimingStats
    timed_at: str  # ISO 8601, UTC
    attempts: int
    age_s: float


@attrs.define
class BaselineOutcome:
    """The timing this evaluation uses, what the report says about it, and notes for the result."""

    stats: TimingStats
    info: dict[str, Any]
    notes: list[str] = attrs.field(factory=list)


def _canonical(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()


class BaselineCache:
    """``get`` / ``put`` signed entries; ``obtain`` is the whole decision the judge relies on."""

    def __init__(self, cache_dir: str | Path | None = None):
        self.dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.path = self.dir / "baselines.json"
        self.notes: list[str] = []  # warnings for the result: entries ignored, a cache that cannot be used
        self._key: bytes | None = None
        self.usable = True
        try:
            self._key = integrity.load_key(self.dir)
        except (integrity.IntegrityError, OSError) as exc:
            self.usable = False
            self.notes.append(f"baseline cache not used: {exc}")

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            self.notes.append(f"baseline cache: {self.path} is not valid JSON; ignored")
            return {}
        return data if isinstance(data, dict) else {}

    def _verified(self, key: str, entry: Any) -> bool:
        if self._key is None or not isinstance(entry, dict):
            return False
        body = {k: v for k, v in entry.items() if k != "mac"}
        return integrity.verify(self._key, MAC_KIND, key, _canonical(body), entry.get("mac"))

    def get(self, key: BaselineKey) -> CachedBaseline | None:
        """The entry for ``key`` if it verifies; an entry that does not is ignored with a note."""
        if not self.usable:
            return None
        entry = self._read().get(key.text)
        if entry is None:
            return None
        try:
            if not self._verified(key.text, entry):
                raise ValueError("its MAC does not verify (written or moved by something other than the "
                                 "evaluator, or by an older kag)")
            stats = from_dict(TimingStats, entry["stats"])
            timed_at = dt.datetime.fromisoformat(entry["timed_at"])
            age = max(0.0, (utc_now() - timed_at).total_seconds())
            return CachedBaseline(stats, entry["timed_at"], int(entry.get("attempts", 1)), round(age, 1))
        except (KeyError, TypeError, ValueError) as exc:
            self.notes.append(f"baseline cache: ignored the entry for {key.baseline} ({key.mode}): {exc}; re-timed")
            return None

    def put(self, key: BaselineKey, stats: TimingStats, attempts: int = 1, timed_at: dt.datetime | None = None,
            conditions: dict[str, Any] | None = None) -> bool:
        """Sign and store ``stats`` under ``key`` unless they did not settle; True when stored.

        Entries of the file that do not verify are dropped on the way.
        """
        if not self.usable or not settled(stats):
            return False
        entry: dict[str, Any] = {
            "format": FORMAT, "stats": to_dict(stats), "runs": stats.n, "attempts": int(attempts),
            "timed_at": (timed_at or utc_now()).isoformat(timespec="seconds"), "facts": attrs.asdict(key),
        }
        if conditions is not None:
            entry["conditions"] = conditions
        assert self._key is not None
        entry["mac"] = integrity.sign(self._key, MAC_KIND, key.text, _canonical(entry))
        integrity.ensure_dir(self.dir)
        with integrity.locked(self.dir / "baselines.json.lock", exclusive=True):
            notes = len(self.notes)
            data = {k: v for k, v in self._read().items() if self._verified(k, v)}
            del self.notes[notes:]  # a bad file was already reported by get
            data[key.text] = entry
            integrity.atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True).encode())
        return True

    def obtain(self, key: BaselineKey, measure: Callable[[], TimingStats], use_cache: bool = True,
               attempts: int = ATTEMPTS, conditions: Callable[[], Any] | None = None) -> BaselineOutcome:
        """The cached timing of ``key`` if one verifies (and ``use_cache``), else ``measure()``
        until ``AGREEING`` settled timings agree (at most ``attempts`` times), caching that one unless
        ``conditions()`` (a kag.core.eval.orchestrator.timing_lock.TimingConditions of the timings) says it was
        timed under load.

        ``info`` is what the judge reports in ``report["baseline_cache"][name]``:
        ``source`` "cache" or "timed"; ``status`` "hit" (from the cache), "miss" (timed now and
        settled: cached unless the cache cannot be used) or "unsettled" (timed now, never settled:
        not cached), "loaded" (timed now under load: not cached); ``cached`` (whether the
        cache now holds it); ``timed_at`` (UTC, ISO 8601); ``age_s`` (0 when timed now); ``runs``
        (timed iterations); ``attempts`` (timings it took); ``iqr_pct`` (IQR in % of the median).
        """
        hit = self.get(key) if use_cache else None
        if hit is not None:
            info = {"source": "cache", "status": "hit", "cached": True, "timed_at": hit.timed_at,
                    "age_s": hit.age_s, "runs": hit.stats.n, "attempts": hit.attempts,
                    "iqr_pct": round(100 * spread(hit.stats), 2)}
            return BaselineOutcome(hit.stats, info, self._take_notes())
        tries: list[TimingStats] = []
        chosen = None
        while chosen is None and len(tries) < max(1, attempts):
            tries.append(measure())
            chosen = _agreed(tries)
        best = chosen or min(tries, key=lambda s: (s.median_ms, s.iqr_ms))
        cond = conditions() if conditions is not None else None
        load = cond.loaded() if cond is not None else None
        stored = chosen is not None and not load and self.put(
            key, chosen, attempts=len(tries), conditions=attrs.asdict(cond) if cond is not None else None)
        status = "loaded" if chosen and load else "miss" if chosen else "unsettled"
        info = {"source": "timed", "status": status, "cached": stored,
                "timed_at": utc_now().isoformat(timespec="seconds"), "age_s": 0.0, "runs": best.n,
                "attempts": len(tries), "iqr_pct": round(100 * spread(best), 2)}
        if cond is not None:
            info["conditions"] = attrs.asdict(cond)
        notes = self._take_notes()
        if load:
            notes.append(f"baseline {key.baseline}: not cached, {load}")
        if chosen is None:
            found = ", ".join(f"{s.median_ms:.4g} ms (IQR {100 * spread(s):.0f}%)" for s in tries)
            notes.append(f"baseline {key.baseline}: its timing did not settle in {len(tries)} attempts ({found}; "
                         f"the cache takes {AGREEING} that agree, each with its median known to "
                         f"{100 * MEDIAN_ERROR_LIMIT:.0f}%); this evaluation uses the lowest median, "
                         f"{best.median_ms:.4g} ms, and does not cache it")
        return BaselineOutcome(best, info, notes)

    def _take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes
