import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kag.core.tasks import TaskError, parse_ids
from kag.plugins.datasets.kernelbench import KernelBenchDataset
from kag.plugins.datasets.local import LocalDataset
from kag.plugins.datasets.ops6k import Ops6kDataset
from tests.conftest import SAMPLE, kernelbench_ids

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_all_kernelbench_tasks_load_fast_and_none_is_skipped(kernelbench_path):
    start = time.perf_counter()
    loaded = KernelBenchDataset(path=str(kernelbench_path)).load()
    elapsed = time.perf_counter() - start
    expected = sum(len(kernelbench_ids(kernelbench_path, level)) for level in (1, 2, 3, 4))
    assert expected in (250, len(list(SAMPLE.glob("level*/*.py"))))  # a whole checkout, or the bundled sample
    assert len(loaded.tasks) == expected and loaded.skipped == []
    assert elapsed < 5.0, f"loading {expected} tasks took {elapsed:.2f} s"
    relu = next(t for t in loaded.tasks if t.name == "level1/19_ReLU")
    assert relu.level == 1 and relu.problem_id == 19 and "torch.relu" in relu.code


def test_level_and_id_selection(kernelbench_path):
    loaded = KernelBenchDataset(path=str(kernelbench_path), level=1, ids="1-20,23").load()
    wanted = set(range(1, 21)) | {23}
    assert sorted(t.problem_id for t in loaded.tasks) == [i for i in kernelbench_ids(kernelbench_path, 1) if i in wanted]
    assert 19 in {t.problem_id for t in loaded.tasks}
    assert {t.level for t in loaded.tasks} == {1}
    assert parse_ids("3,1-2") == {1, 2, 3}
    with pytest.raises(TaskError, match="bad problem ids"):
        parse_ids("a-b")


def test_kernelbench_accepts_checkout_with_inner_folder(tmp_path, kernelbench_path):
    inner = tmp_path / "KernelBench" / "level2"
    inner.mkdir(parents=True)
    shutil.copy(kernelbench_path / "level2" / "12_Gemm_Multiply_LeakyReLU.py", inner)
    loaded = KernelBenchDataset(path=str(tmp_path)).load()
    assert [t.name for t in loaded.tasks] == ["level2/12_Gemm_Multiply_LeakyReLU"]


def test_missing_path_says_how_to_fix(monkeypatch, tmp_path):
    monkeypatch.delenv("KAG_KERNELBENCH", raising=False)
    with pytest.raises(TaskError, match="KAG_KERNELBENCH"):
        KernelBenchDataset()
    with pytest.raises(TaskError, match="no level1..level4"):
        KernelBenchDataset(path=str(tmp_path))


def test_folder_with_broken_files_loads_the_rest_and_names_them(tmp_path, kernelbench_path):
    shutil.copy(kernelbench_path / "level1" / "19_ReLU.py", tmp_path / "relu.py")
    (tmp_path / "no_inputs.py").write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    (tmp_path / "bad_import.py").write_text(
        "import not_a_real_module\nclass Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n")
    (tmp_path / "syntax.py").write_text("def (:\n")
    loaded = LocalDataset(path=str(tmp_path)).load()
    assert [t.name for t in loaded.tasks] == ["relu"]
    reasons = {Path(s.path).name: s.reason for s in loaded.skipped}
    assert "missing get_inputs, get_init_inputs" in reasons["no_inputs.py"]
    assert "fails to import: ModuleNotFoundError" in reasons["bad_import.py"]
    assert "syntax error" in reasons["syntax.py"] and "syntax.py:1" in reasons["syntax.py"]


def test_ops6k_jsonl_and_parquet_fixture(tmp_path):
    jsonl = FIXTURES / "ops6k" / "sample.jsonl"
    loaded = Ops6kDataset(path=str(jsonl)).load()
    assert len(loaded.tasks) == 3 and len(loaded.skipped) == 1
    assert "missing get_inputs" in loaded.skipped[0].reason and "#row3" in loaded.skipped[0].path
    assert loaded.tasks[0].metadata == {"ops": ["torch.relu", "mul"], "data_source": "torch#2"}

    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    parquet = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    from_parquet = Ops6kDataset(path=str(parquet), ids="0-1").load()
    assert [t.name for t in from_parquet.tasks] == ["data/0", "data/1"]


def test_ops6k_missing_column_names_the_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"code": "x"}) + "\n")
    with pytest.raises(TaskError, match=r"bad.jsonl: missing column\(s\) ops, data_source"):
        Ops6kDataset(path=str(bad)).load()
