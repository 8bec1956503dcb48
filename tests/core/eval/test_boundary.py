"""The typed judge boundary: JudgeSpec, CandidateSpec and JudgeReport survive their crossings."""

import json

import attrs
import pytest

from kag.core.eval.orchestrator.evaluate import EvalOptions, _judge_spec, _merge
from kag.core.eval.orchestrator.judge_process import failed_report
from kag.core.eval.orchestrator.plan import resolve
from kag.core.eval.boundary import CandidateSpec, JudgeReport, JudgeSpec, Timeouts
from kag.core.plugins import Plugins
from kag.core.records import EvalResult, Task, TimingStats, from_dict, to_dict

TASK = Task(name="t", source="file", code="import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
            "def get_inputs():\n    return [torch.ones(2)]\ndef get_init_inputs():\n    return []\n", path="/t/t.py")


def spec() -> JudgeSpec:
    opts = EvalOptions(backend="cpu", seed=7, timeouts=Timeouts(check_s=3.0), guards=("no-tampering",),
                       guard_options={"allow_cublas": False})
    return _judge_spec(TASK, opts, resolve(opts, Plugins()), "/s/model_new.py", None)


def test_judge_spec_crosses_as_data_and_comes_back_equal():
    s = spec()
    wire = json.loads(json.dumps(to_dict(attrs.evolve(s, visible_devices="1"))))
    back = from_dict(JudgeSpec, wire)
    assert back == attrs.evolve(s, visible_devices="1")
    assert back.timeouts.check_s == 3.0 and isinstance(back.timeouts, Timeouts)
    assert back.baselines == [("eager", "default"), ("compile", "default")]
    assert back.seed == 7 and back.guard_options["allow_cublas"] is False
    assert back.runtime_guards == ["no-tampering"] and back.tolerance == "cuda-agent"
    assert s.num_timed == 100 and s.timeouts is not EvalOptions().timeouts  # the shared settings, copied


def test_the_candidate_is_told_the_task_and_nothing_secret():
    c = spec().candidate()
    assert set(attrs.fields_dict(CandidateSpec)) == {"task_code", "task_path", "init_seed", "model_new_path", "module_dir"}
    assert from_dict(CandidateSpec, to_dict(c)) == c
    assert "seed" not in to_dict(c) and "tolerance" not in to_dict(c)


def test_a_field_one_side_does_not_know_is_an_error_not_a_loss():
    with pytest.raises(ValueError, match="unknown fields"):
        from_dict(JudgeSpec, {**to_dict(spec()), "new_option": 1})
    with pytest.raises(ValueError, match="unknown fields"):
        from_dict(JudgeReport, {"correct": True, "verdict": "fast"})


def test_report_round_trip_and_merge_into_the_result():
    report = JudgeReport(correct=True, times_ms={"candidate": 1.5, "eager": 3.0},
                         timing={"candidate": TimingStats(1.5, 1.6, 1.4, 2.0, 0.1, 0.1, 100)},
                         notes=["n"], calibration={"null_window_ms": 0.06}, rechecked_calls=12)
    report.violation("evaluator", "timing: something")
    back = from_dict(JudgeReport, json.loads(json.dumps(to_dict(report))))
    assert back == report and isinstance(back.timing["candidate"], TimingStats)
    result = EvalResult(task="t", backend="cpu")
    _merge(result, back)
    assert result.correct and result.error_kind == "guard" and "something" in result.error
    assert result.timing["candidate"].n == 100 and result.times_ms["eager"] == 3.0
    assert result.metadata["rechecked_calls"] == 12 and result.metadata["notes"] == ["n"]
    assert "judge_error" not in result.metadata  # only when the judge itself failed


def test_a_judge_that_gave_no_verdict_fails_the_evaluation_as_its_own_error():
    result = EvalResult(task="t", backend="cpu")
    _merge(result, failed_report("timeout", "the evaluation did not finish within 9 s and was killed"))
    assert not result.correct and result.error_kind == "timeout" and result.metadata["judge_error"] is True
