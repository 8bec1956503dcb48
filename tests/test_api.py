"""The public API: everything here is reached through ``import kag`` alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kag

ROOT = Path(__file__).resolve().parents[1]
RELU = ROOT / "examples" / "relu"
QUICK = dict(num_checks=2, num_timed=5, warmup=1)


def test_every_public_name_resolves_and_import_kag_stays_light():
    for name in kag.__all__:
        assert getattr(kag, name) is not None, name
    code = "import sys, kag; print(sorted(m for m in ('torch', 'kag.api', 'kag.core.eval.orchestrator.evaluate') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_load_task_and_load_solution_take_files_folders_and_text():
    task = kag.load_task(RELU / "cpu" / "model.py")
    assert isinstance(task, kag.Task) and task.name == "relu/cpu" and "class Model" in task.code
    assert kag.load_task(task) is task
    folder = kag.load_solution(RELU / "cpu")
    assert isinstance(folder, kag.Solution) and sorted(folder.kernels) == ["relu.cpp", "relu_binding.cpp"]
    single = kag.load_solution(RELU / "kernelbench" / "cpu" / "model_new.py")
    assert "load_inline" in single.model_new and not single.kernels
    text = kag.load_solution("Sure:\n```python model_new.py\nimport cuda_extension\n```\n```cpp kernels/a.cpp\nint x;\n```\n")
    assert text.kernels == {"a.cpp": "int x;\n"}
    with pytest.raises(kag.TaskError, match="not a dataset id"):
        kag.load_task("no/such/file.py")
    with pytest.raises(kag.AnswerFormatError, match="no fenced files"):
        kag.load_solution("just words")


def test_unknown_options_are_named_with_the_known_ones():
    with pytest.raises(TypeError, match="unknown evaluation option.*num_timd.*known:.*num_timed"):
        kag.evaluate(RELU / "cpu" / "model.py", RELU / "cpu", backend="cpu", num_timd=3)


def test_a_completion_without_a_solution_gets_the_failure_verdict():
    result = kag.evaluate(RELU / "cpu" / "model.py", "I cannot do that.", backend="cpu")
    assert isinstance(result, kag.EvalResult)
    assert not result.ok and result.error.startswith("unparseable answer") and result.reward.value == -1


@pytest.mark.slow
def test_a_single_file_solution_scores_like_its_workspace_twin_on_cpu():
    """examples/relu/kernelbench/cpu (load_inline) and examples/relu/cpu (workspace): both build
    through kag, pass every guard and are correct, as one batch through evaluate_many."""
    task = RELU / "cpu" / "model.py"
    twin, single = kag.evaluate_many([(task, RELU / "cpu"), (task, RELU / "kernelbench" / "cpu" / "model_new.py")],
                                     backend="cpu", **QUICK)
    assert twin.ok, twin.error
    assert single.ok, single.error
    assert single.metadata["converted_from"] == "kernelbench-single-file"
    assert single.metadata["converted_files"] == ["relu_cpu_binding.cpp"]
    assert single.reward.value >= 1 and twin.reward.value >= 1
    assert single.times_ms["candidate"] > 0 and single.speedup_vs_eager and single.speedup_vs_compile
