"""Near misses settled against a float64 reference (kag.core.eval.judge.reference64), end to end on the CPU."""

import textwrap

import pytest

from kag.core.eval.judge.compare import compare_outputs
from kag.core.eval.orchestrator.evaluate import EvalOptions, Timeouts, evaluate
from kag.core.records import Solution, Task

# The float32 reference loses x[0, 0] entirely ((x + 1e8) - 1e8 rounds to 0); in float64 it keeps it.
TASK_CODE = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            y = x.clone()
            y[0, 0] = (x[0, 0] + 1e8) - 1e8
            return y

    def get_inputs():
        return [torch.rand(64, 64) + 0.5]

    def get_init_inputs():
        return []
''')


def solution(body: str) -> Solution:
    return Solution(model_new=textwrap.dedent('''
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, x):
        ''') + textwrap.indent(textwrap.dedent(body), " " * 8))


@pytest.fixture(scope="module")
def task():
    return Task(name="cancel", source="file", code=TASK_CODE)


def options(tmp_path):
    return EvalOptions(backend="cpu", num_checks=3, num_timed=3, warmup=1, cache_dir=str(tmp_path), guards=(),
                       timeouts=Timeouts(load_s=60, check_s=10))


def test_the_exact_answer_is_accepted_where_the_float32_reference_rounded_it_away(task, tmp_path):
    result = evaluate(task, solution("return x.clone()"), options(tmp_path))
    assert result.ok and result.correct, result.error
    notes = " ".join(result.metadata.get("notes", []))
    assert "1 of 4096 values outside tolerance of the float32 reference" in notes and "float64" in notes


def test_a_wrong_value_stays_wrong_against_the_float64_reference(task, tmp_path):
    result = evaluate(task, solution("y = x.clone()\ny[1, 1] += 1.0\nreturn y"), options(tmp_path))
    assert not result.ok and result.error_kind == "mismatch"
    assert "check 1 of 3" in result.error and "2 of 4096 elements outside tolerance" in result.error


def test_only_near_misses_are_sent_to_the_float64_reference():
    import torch

    ref = torch.rand(100, 100)
    near = ref.clone()
    near[0, 0] += 1
    far = ref + 1
    loose = lambda dtype: (1e-2, 1e-2)  # noqa: E731
    assert compare_outputs(ref, near, loose).few_values_off
    assert not compare_outputs(ref, far, loose).few_values_off
    assert not compare_outputs(ref, torch.rand(3), loose).few_values_off  # a shape mismatch
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert not compare_outputs(ref, nan, loose).few_values_off
