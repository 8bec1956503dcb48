"""KernelBench levels as tasks: a checkout, its ``KernelBench/`` folder, or a folder of levelN/."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable

from kag.plugin import LoadedTasks, Task, TaskError, collect, hookimpl, parse_ids, read_text

_FILE = re.compile(r"^(\d+)_(.+)\.py$")


class KernelBenchDataset:
    """Problems of KernelBench (``level=1``, ``ids=1-20,23``)."""

    def __init__(self, path: str | None = None, level: int | str | Iterable[int] | None = None,
                 ids: str | Iterable[int] | None = None, **_: Any):
        raw = path or os.environ.get("KAG_KERNELBENCH")
        if not raw:
            raise TaskError(
                "no KernelBench path: set KAG_KERNELBENCH=PATH (the folder holding level1/..level3/), add "
                "[datasets.kernelbench] path = \"...\" to kag.toml, or pass --dataset kernelbench:PATH where a "
                "command takes --dataset (kag eval, kag tasks); kag score also takes a task file: --task FILE.py"
            )
        self.root = self._find_root(Path(raw).expanduser())
        if level is None or level == "":
            self.levels = None
        elif isinstance(level, (int, str)):
            self.levels = parse_ids(str(level))
        else:
            self.levels = {int(x) for x in level}
        self.ids = parse_ids(ids)

    @staticmethod
    def _find_root(path: Path) -> Path:
        for candidate in (path, path / "KernelBench"):
            if any((candidate / f"level{n}").is_dir() for n in range(1, 5)):
                return candidate
        raise TaskError(f"{path}: no level1..level4 folders here or in {path}/KernelBench; "
                        f"point kernelbench:PATH at a KernelBench checkout")

    def files(self) -> list[tuple[int, int, Path]]:
        found = []
        for level_dir in sorted(self.root.glob("level*")):
            match = re.fullmatch(r"level(\d+)", level_dir.name)
            if not match or not level_dir.is_dir():
                continue
            level = int(match.group(1))
            if self.levels is not None and level not in self.levels:
                continue
            for file in level_dir.glob("*.py"):
                m = _FILE.match(file.name)
                if not m:
                    continue
                pid = int(m.group(1))
                if self.ids is None or pid in self.ids:
                    found.append((level, pid, file))
        return sorted(found)

    def load(self, execute: bool = True) -> LoadedTasks:
        def make(level: int, pid: int, file: Path):
            return lambda: Task(name=f"level{level}/{file.stem}", source="kernelbench", code=read_text(file),
                                level=level, problem_id=pid, path=str(file))

        return collect(((str(f), make(lvl, pid, f)) for lvl, pid, f in self.files()), execute=execute)


@hookimpl
def kag_register_datasets(register) -> None:
    register("kernelbench", KernelBenchDataset)
