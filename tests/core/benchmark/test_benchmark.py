import json

from kag.core.benchmark.engine import finished_tasks, run_all, write_summary
from kag.core.records import EvalResult, RewardValue, Task


def _task(i: int, level: int) -> Task:
    return Task(name=f"level{level}/{i}_t", source="kernelbench", code="", level=level, problem_id=i)


def _run_one(task: Task):
    if task.problem_id == 3:
        raise RuntimeError("episode blew up")
    ok = task.problem_id != 2
    result = EvalResult(task=task.name, compiled=ok, correct=ok, speedup_vs_eager=2.0 if ok else None,
                        speedup_vs_compile=1.5 if ok else None, reward=RewardValue("milestone", 3.0 if ok else -1.0))
    return None, result, None


def test_results_are_written_per_task_resumed_and_summarised(tmp_path):
    tasks = [_task(1, 1), _task(2, 1), _task(3, 2), _task(4, 2)]
    assert run_all(tasks[:2], tmp_path, _run_one) == 2
    assert finished_tasks(tmp_path) == {"level1/1_t", "level1/2_t"}
    # a torn last line (a killed writer) is repaired, and its task runs again
    with open(tmp_path / "results.jsonl", "a") as fh:
        fh.write('{"task": "level2/4_t", "res')
    assert run_all(tasks, tmp_path, _run_one, concurrency=2) == 2
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task"] for r in rows) == ["level1/1_t", "level1/2_t", "level2/3_t", "level2/4_t"]
    crashed = next(r for r in rows if r["task"] == "level2/3_t")
    assert crashed["result"] is None and "episode blew up" in crashed["stop_reason"]

    table = write_summary(tmp_path)
    assert table["overall"]["tasks"] == 4 and table["overall"]["passed"] == 2
    assert table["level1"]["pass_rate"] == 0.5 and table["level2"]["faster_than_compile"] == 0.5
    assert table["overall"]["geomean_vs_compile"] == 1.5
    assert table["overall"]["fast_p_compile"]["1.0"] == 0.5
    assert (tmp_path / "fast_p.png").stat().st_size > 1000
    assert "| level1 | 2 | 50.0% |" in (tmp_path / "summary.md").read_text()
    # the executor's counts, over both invocations (the one-line form is in summary.md)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["executor"] == {"invocations": 2, "executors": ["local"], "jobs": 4, "retries": 0,
                                   "lost_workers": 0, "restarted_workers": 0}
    assert "Executor (local, 2 invocation(s)): 4 jobs, 0 retried" in (tmp_path / "summary.md").read_text()


def test_a_bad_complete_result_line_is_an_error_not_a_silent_rerun(tmp_path):
    import pytest

    from kag.core.records import JsonlError

    (tmp_path / "results.jsonl").write_text('{"task": "level1/1_t"}\n{"task": "lev\n{"task": "level1/3_t"}\n')
    with pytest.raises(JsonlError, match="results.jsonl:2: not valid JSON"):
        finished_tasks(tmp_path)
