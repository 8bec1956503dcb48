"""Baseline timings cached in ``<cache>/baselines.json``.

Keyed by (task code hash, device name, torch version, baseline, mode, timed iterations): the
baselines of a task do not change between candidates, and timing torch.compile costs seconds to
minutes. Writes are atomic (temp file + rename) under an flock so parallel evaluations share it.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from kag.core.records import TimingStats, from_dict, to_dict


def default_cache_dir() -> Path:
    """The same root as the build cache (``$KAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/kag``)."""
    from kag.core.build import cache_root

    return cache_root()


def cache_key(task_hash: str, device_name: str, torch_version: str, baseline: str, mode: str,
              num_timed: int) -> str:
    return "|".join([task_hash, device_name, torch_version, baseline, mode or "-", str(num_timed)])


class BaselineCache:
    def __init__(self, cache_dir: str | Path | None = None):
        self.dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.path = self.dir / "baselines.json"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> TimingStats | None:
        entry = self._read().get(key)
        if not isinstance(entry, dict):
            return None
        try:
            return from_dict(TimingStats, entry)
        except (TypeError, ValueError):
            return None

    def put(self, key: str, stats: TimingStats) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "baselines.json.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._read()
            data[key] = to_dict(stats)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".baselines-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
