"""The guards wired into the evaluator (CPU backend, real judge and candidate processes).

This module is also a guard plugin (``test-marker``): the judge rebuilds it from its module name,
which is how a third-party guard judges what the candidate's calls did.
"""

from __future__ import annotations

import textwrap

import pytest

from kag.core.eval.orchestrator.evaluate import EvalOptions, Timeouts, evaluate, guard_options
from kag.core.hookspecs import hookimpl
from kag.core.plugins import DEFAULT_PLUGINS, Plugins
from kag.core.records import Solution, Task, Violation

TASK_CODE = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2.0

    def get_inputs():
        return [torch.randn(32, 64)]

    def get_init_inputs():
        return []
''')


class ReportObservations:
    """Reports the options it was built with and what the observer saw of the calls."""

    name = "test-marker"

    def __init__(self, **options):
        self.options = options

    def check_observations(self, obs, info):
        if self.options.get("tolerance") != "strict":
            return []
        return [Violation(self.name, f"options {sorted(self.options.items())} device {info.device} "
                                     f"solution_dir {bool(info.solution_dir)} calls {obs.calls} "
                                     f"ops {sorted(obs.ops)}")]


@hookimpl
def kag_register_guards(register) -> None:
    register("test-marker", ReportObservations)


def solution(body: str) -> Solution:
    return Solution(model_new=textwrap.dedent('''
        import os
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, x):
        ''') + textwrap.indent(textwrap.dedent(body), " " * 8))


HONEST = solution("return x.clamp_min(0) * 2.0")


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    path = tmp_path_factory.mktemp("task") / "model.py"
    path.write_text(TASK_CODE)
    return Task(name="relu2", source="file", code=TASK_CODE, path=str(path))


@pytest.fixture(scope="module")
def plugins():
    return Plugins(load_entrypoints=False, builtins=DEFAULT_PLUGINS + (__name__,))


def options(tmp_path, **kw):
    base = dict(backend="cpu", do_timing=False, num_checks=2, cache_dir=str(tmp_path),
                timeouts=Timeouts(load_s=60, check_s=10), guards=("test-marker",))
    base.update(kw)
    return EvalOptions(**base)


def test_a_third_party_guard_judges_the_observed_calls_with_the_guard_options(task, plugins, tmp_path):
    result = evaluate(task, HONEST, options(tmp_path, tolerance="strict", guard_options={"allow_cublas": False}),
                      plugins)
    assert result.error_kind == "guard" and result.correct, result.error
    (v,) = result.violations
    assert v.guard == "test-marker"
    assert "('allow_cublas', False)" in v.detail and "('tolerance', 'strict')" in v.detail
    assert "device cpu" in v.detail and "solution_dir True" in v.detail
    assert "calls 2" in v.detail and "aten::clamp_min" in v.detail  # both checks, HONEST's torch ops
    assert result.reward.value == -1
    clean = evaluate(task, HONEST, options(tmp_path), plugins)
    assert clean.ok and clean.violations == [], clean.error


def test_every_call_is_watched_alike(task, plugins, tmp_path):
    """A solution that computes with PyTorch only where it sees no profiler: every call looks the
    same to it (with torch's all-threads profiling, none looks watched), and its PyTorch compute is
    seen on every call that takes that path."""
    sneaky = solution('''
    if not torch._C._autograd._profiler_enabled():
        print("UNWATCHED CALL", flush=True)
        return torch.relu(x) * 2.0
    return x.clamp_min(0) * 2.0
''')
    result = evaluate(task, sneaky, options(tmp_path, guards=("no-torch-fallback",), do_timing=True, num_timed=3,
                                            warmup=1, static_guards=False), plugins)
    printed = result.metadata.get("candidate_output", "").count("UNWATCHED CALL")
    assert printed in (0, result.metadata["observed"]["calls"]), printed  # never, or on every call
    op = "aten::relu" if printed else "aten::clamp_min"
    assert result.error_kind == "guard" and op in result.error, result.error
    assert result.reward.value == -1


def test_an_output_cache_fails_the_next_check(task, tmp_path):
    """Invisible to the static checks (no assignment to self in forward) and to every guard: the second
    check writes fresh inputs into the same tensors, and the cached output is wrong for them."""
    cached = solution('''
    if not hasattr(self, "_out"):
        object.__setattr__(self, "_out", x.clamp_min(0) * 2.0)
    return self._out.clone()
''')
    result = evaluate(task, cached, options(tmp_path, num_checks=2, guards=()))
    assert result.error_kind == "mismatch" and "check 2 of 2" in result.error, result.error
    assert not result.ok and not result.correct and result.reward.value == -1


def test_guard_options_carry_the_tolerance_policy():
    plugins = Plugins(load_entrypoints=False)
    assert guard_options(EvalOptions(tolerance="strict", guard_options={"allow_cublas": False}), plugins) == \
        {"allow_cublas": False, "tolerance": "strict"}
    assert guard_options(EvalOptions(), plugins)["tolerance"] == "cuda-agent"


def test_the_guards_are_built_in():
    assert set(Plugins(load_entrypoints=False).names("guard")) >= {
        "no-torch-fallback", "kernel-provenance", "no-output-reuse", "no-hidden-work", "no-tampering", "precision"}


LATER = '''
import sys
import torch
import torch.nn as nn
from torch.multiprocessing.reductions import reduce_tensor

%s


class Later:
    """Not a tensor: computes the output only when the output is handed over (pickled)."""

    def __init__(self, x, buf):
        self.x, self.buf = x.numpy(), buf  # numpy views taken in the call

    def __reduce_ex__(self, protocol):  # numpy: no PyTorch operator runs while it is handed over
        import numpy as np

        out = self.buf[1]
        np.maximum(self.x, 0.0, out=out)
        out *= 2.0
        return reduce_tensor(self.buf[0])


class ModelNew(nn.Module):
    def forward(self, x):
        if not hasattr(self, "buf"):
            buf = torch.empty_like(x).share_memory_()
            self.buf = (buf, buf.numpy())
        return Later(x, self.buf)
'''


def test_an_output_object_that_works_when_handed_over_is_refused(task, tmp_path):
    """Found by a reviewer: an object whose __reduce_ex__ computes the output at hand-over left no
    extents to read from memory and skipped the hand-over's poisoning (2.2x eager on the CPU)."""
    result = evaluate(task, Solution(model_new=LATER % "pass"),
                      options(tmp_path, guards=(), do_timing=True, num_timed=12, warmup=1, static_guards=False))
    assert not result.ok and "returned a Later in its output" in (result.error or ""), result.error
    assert result.reward.value == -1


def test_with_the_harness_check_patched_away_the_judge_still_reads_the_output_from_memory(task, tmp_path):
    """The check above runs in the candidate's process, which the solution can patch; the judge does
    not rely on it: a re-checked timed call whose output is not in memory where its answer put it fails."""
    patch = 'sys.modules["kag.core.eval.candidate.candidate"].plain_output = lambda out, on_cpu: out  # at import'
    result = evaluate(task, Solution(model_new=LATER % patch),
                      options(tmp_path, guards=(), do_timing=True, num_timed=12, warmup=1, static_guards=False))
    assert not result.ok and result.reward.value == -1, (result.error, result.times_ms)
    assert "not where the window's end said it is" in (result.error or ""), result.error
