"""A user's own task: one ``.py`` file in the KernelBench format, or a folder of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kag.plugin import LoadedTasks, Task, TaskError, collect, hookimpl, read_text


class LocalDataset:
    def __init__(self, path: str | None = None, **_: Any):
        if not path:
            raise TaskError("the local dataset needs a path: --dataset local:FILE_OR_FOLDER")
        self.path = Path(path).expanduser()
        if not self.path.exists():
            raise TaskError(f"{self.path} does not exist; give a task .py file or a folder of them")

    def files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        return sorted(p for p in self.path.rglob("*.py") if not p.name.startswith("_"))

    def load(self, execute: bool = True) -> LoadedTasks:
        base = self.path if self.path.is_dir() else self.path.parent

        def make(file: Path):
            name = str(file.relative_to(base).with_suffix(""))
            return lambda: Task(name=name, source="local", code=read_text(file), path=str(file))

        return collect(((str(f), make(f)) for f in self.files()), execute=execute)


@hookimpl
def kag_register_datasets(register) -> None:
    register("local", LocalDataset)
