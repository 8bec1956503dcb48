"""CUDA-Agent-Ops-6K (parquet or jsonl with columns ``code``, ``ops``, ``data_source``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from kag.plugin import LoadedTasks, Task, TaskError, collect, hookimpl, parse_ids

COLUMNS = ("code", "ops", "data_source")


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of an Ops-6K file; a missing column is an error naming the file."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        missing = [c for c in COLUMNS if c not in table.column_names]
        rows = table.to_pylist()
    elif path.suffix in (".jsonl", ".json"):
        rows = []
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise TaskError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        missing = [c for c in COLUMNS if rows and c not in rows[0]]
    else:
        raise TaskError(f"{path}: expected a .parquet or .jsonl file in the Ops-6K schema")
    if missing:
        raise TaskError(f"{path}: missing column(s) {', '.join(missing)}; Ops-6K rows need {', '.join(COLUMNS)}")
    return rows


class Ops6kDataset:
    """Each row is a task named ``ops6k/ROW`` (``ids=`` selects row numbers)."""

    def __init__(self, path: str | None = None, ids: str | Iterable[int] | None = None, **_: Any):
        if not path:
            raise TaskError("the ops6k dataset needs a file: --dataset ops6k:data.parquet")
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise TaskError(f"{self.path} does not exist; download CUDA-Agent-Ops-6K or build one with kag data")
        self.ids = parse_ids(ids)

    def load(self, execute: bool = True) -> LoadedTasks:
        rows = read_rows(self.path)
        stem = self.path.stem

        def make(i: int, row: dict[str, Any]):
            ops = row.get("ops")
            if isinstance(ops, str):
                try:
                    ops = json.loads(ops)
                except json.JSONDecodeError:
                    ops = [ops]
            meta = {"ops": list(ops or []), "data_source": row.get("data_source")}
            return lambda: Task(name=f"{stem}/{i}", source="ops6k", code=str(row["code"]), problem_id=i,
                                path=f"{self.path}#row{i}", metadata=meta)

        items = ((f"{self.path}#row{i}", make(i, r)) for i, r in enumerate(rows) if self.ids is None or i in self.ids)
        return collect(items, execute=execute)


@hookimpl
def kag_register_datasets(register) -> None:
    register("ops6k", Ops6kDataset)
