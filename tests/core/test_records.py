import json

import pytest

from kag.core.records import (EvalResult, Message, RewardValue, Solution, Task, TimingStats, ToolCall,
                              Trajectory, Turn, Violation, from_dict, from_json, to_dict, to_json)


def _eval_result() -> EvalResult:
    return EvalResult(
        task="level1/19_ReLU", backend="cuda", compiled=True, correct=True,
        violations=[Violation("no-fallback", "model_new.py:12 torch.relu")], error=None,
        times_ms={"candidate": 1.5, "eager": 2.0, "compile": 1.9},
        timing={"candidate": TimingStats(1.5, 1.52, 1.4, 1.9, 0.05, 0.02, 100)},
        speedup_vs_eager=1.33, speedup_vs_compile=1.27, reward=RewardValue("milestone", 3.0),
        device={"name": "H100", "clocks": {"sm": 1980}}, peak_memory_mb=123.5, metadata={"seed_hidden": True})


RECORDS = [
    Task(name="level1/19_ReLU", source="kernelbench", code="import torch\n", level=1, problem_id=19,
         path="/x/19_ReLU.py", metadata={"ops": ["relu"]}),
    Solution(model_new="import cuda_extension\n", kernels={"relu.cu": "__global__ void k(){}"},
             ignored_files=["utils/verification.py"]),
    _eval_result(),
    Trajectory(
        episode_id="ep-1", task="level1/19_ReLU",
        messages=[Message("system", "hi"), Message("assistant", "", [ToolCall("c1", "bash", {"command": "ls"})])],
        turns=[Turn(0, Message("assistant", "ok", [ToolCall("c1", "read", {"path": "model.py"})]),
                    observations=[Message("tool", "x", tool_call_id="c1", name="read")],
                    prompt_token_ids=[1, 2], response_token_ids=[3, 4], response_logprobs=[-0.1, -0.2],
                    eval_results=[_eval_result()], usage={"prompt_tokens": 2}, elapsed_s=0.5)],
        result=_eval_result(), reward=3.0, stop_reason="model_stopped", policy="replay",
        plugins={"reward": ["milestone"]}, kag_version="0.1.0", elapsed_s=12.0),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_json_round_trip_is_lossless(record):
    text = to_json(record)
    back = from_json(type(record), text)
    assert back == record
    assert to_dict(back) == json.loads(text)


def test_unknown_fields_are_rejected_not_dropped():
    with pytest.raises(ValueError, match="unknown fields"):
        from_dict(Task, {"name": "a", "source": "b", "code": "", "bogus": 1})


def test_ok_requires_build_correctness_and_no_violation():
    assert not EvalResult(task="t", compiled=True, correct=True, violations=[Violation("g", "d")]).ok
    assert EvalResult(task="t", compiled=True, correct=True).ok


def test_jsonl_append_and_read_survive_a_killed_writer(tmp_path):
    """The one JSONL appender and reader: a torn last line (no newline) is skipped when read and cut
    off before the next append; a bad complete line is an error naming file:line, never dropped."""
    from kag.core.records import JsonlError, append_jsonl, iter_jsonl, read_jsonl

    path = tmp_path / "sub" / "log.jsonl"
    assert read_jsonl(path) == []
    append_jsonl(path)  # no records: the file exists, empty
    assert path.read_bytes() == b""
    append_jsonl(path, {"a": 1}, Message(role="user", content="hi"))
    assert read_jsonl(path) == [{"a": 1}, to_dict(Message(role="user", content="hi"))]
    with open(path, "ab") as fh:  # killed mid-line, in the middle of a multi-byte character
        fh.write('{"b": "\u00e9'.encode()[:-1])
    assert [n for n, _ in iter_jsonl(path)] == [1, 2]
    append_jsonl(path, {"c": 3})
    assert read_jsonl(path)[-1] == {"c": 3} and path.read_text().count("\n") == 3
    path.write_text('{"a": 1}\nnot json\n{"c": 3}\n')
    with pytest.raises(JsonlError, match=r"log.jsonl:2: not valid JSON.*remove or fix that line"):
        read_jsonl(path)
    path.write_text('{"a": 1}\n{"b": \n')  # complete (newline-ended) but bad: not a torn write
    with pytest.raises(ValueError, match=r"log.jsonl:2: not valid JSON"):
        read_jsonl(path)
