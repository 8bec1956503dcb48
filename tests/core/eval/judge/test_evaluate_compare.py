"""Unit tests of the judge's pieces that need no processes: comparison, unpickling, stats, plugins."""

import math

import pytest
import torch

from kag.core.eval.boundary import RefusedObject, restricted_loads
from kag.core.eval.candidate.channel import dumps
from kag.core.eval.judge.compare import compare_outputs
from kag.core.plugins import Plugins
from kag.core.eval.judge.timing import Clock, summarize

LOOSE = lambda dtype: (1e-2, 1e-2)  # noqa: E731


def test_equal_tensors_and_containers_match():
    t = torch.randn(4, 5)
    assert compare_outputs(t, t.clone(), LOOSE) is None
    ref = (t, [t * 2, {"a": t + 1}], 3, 1.5)
    out = (t.clone(), [t * 2, {"a": t + 1}], 3, 1.5 + 1e-4)
    assert compare_outputs(ref, out, LOOSE) is None


def test_first_mismatch_reports_index_and_errors():
    ref = torch.zeros(3, 4)
    out = ref.clone()
    out[1, 2] = 0.5
    out[2, 3] = 0.25
    m = compare_outputs(ref, out, LOOSE)
    assert m is not None and m.index == (1, 2)
    assert "index [1, 2]" in m.message and "2 of 12 elements" in m.message
    assert m.max_abs_error == pytest.approx(0.5)


def test_exact_type_shape_dtype_are_checked():
    class Sub(torch.Tensor):
        pass

    t = torch.randn(3)
    assert "types must match exactly" in str(compare_outputs(t, t.as_subclass(Sub), LOOSE))
    assert "shape" in str(compare_outputs(t, torch.randn(1, 3), LOOSE))
    assert "dtype" in str(compare_outputs(t, t.double(), LOOSE))
    assert "type list" in str(compare_outputs((t,), [t], LOOSE))
    assert "2 items" in str(compare_outputs((t,), (t, t), LOOSE))
    assert "keys" in str(compare_outputs({"a": t}, {"b": t}, LOOSE))


def test_nan_must_match_and_inf_must_match():
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_outputs(ref, ref.clone(), LOOSE) is None
    out = ref.clone()
    out[0] = float("nan")
    assert "index [0]" in str(compare_outputs(ref, out, LOOSE))
    out = ref.clone()
    out[1] = 0.0
    assert "index [1]" in str(compare_outputs(ref, out, LOOSE))
    out = ref.clone()
    out[2] = -math.inf
    assert "index [2]" in str(compare_outputs(ref, out, LOOSE))


def test_integer_outputs_need_exact_equality():
    ref = torch.arange(10)
    out = ref.clone()
    out[7] += 1
    assert "exact match required" in str(compare_outputs(ref, out, LOOSE))


def test_constant_output_is_rejected_even_within_tolerance():
    ref = torch.rand(1000) * 0.009  # every element within atol=1e-2 of zero
    zeros = torch.zeros_like(ref)
    m = compare_outputs(ref, zeros, LOOSE)
    assert m is not None and "constant" in m.message
    # a constant reference and a constant output are fine
    assert compare_outputs(torch.full((10,), 3.0), torch.full((10,), 3.0), LOOSE) is None


def test_tolerance_plugins():
    pl = Plugins(load_entrypoints=False)
    agent, strict = pl.create("tolerance", "cuda-agent"), pl.create("tolerance", "strict")
    assert agent.tolerance(torch.float32) == (1e-2, 1e-2)
    assert strict.tolerance(torch.float32) == (1e-4, 1e-4)
    assert strict.tolerance(torch.bfloat16) == (1e-2, 1e-2)
    ref = torch.ones(10)
    out = ref + 1e-3
    assert compare_outputs(ref, out, agent.tolerance) is None
    assert compare_outputs(ref, out, strict.tolerance) is not None


def test_baseline_plugins_and_modes():
    pl = Plugins(load_entrypoints=False)
    model = torch.nn.ReLU()
    assert pl.create("baseline", "eager").prepare(model) is model
    for mode in ("default", "max-autotune-no-cudagraphs", "reduce-overhead"):
        assert pl.create("baseline", "compile", mode=mode).mode == mode
    with pytest.raises(ValueError, match="unknown torch.compile mode"):
        pl.create("baseline", "compile", mode="fast")


def test_compile_modes_are_listed_once():
    """The CLI offers exactly the modes the compile baseline accepts."""
    from kag.cli.score_cmd import score
    from kag.core.eval.orchestrator.evaluate import COMPILE_MODES

    option = next(p for p in score.params if p.name == "compile_mode")
    assert tuple(option.type.choices) == COMPILE_MODES
    pl = Plugins(load_entrypoints=False)
    assert [pl.create("baseline", "compile", mode=m).mode for m in COMPILE_MODES] == list(COMPILE_MODES)


class SubTensor(torch.Tensor):
    pass


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_restricted_unpickling_allows_tensors_and_refuses_subclasses():
    msg = ("outputs", 0, (torch.randn(3), {"x": torch.ones(2, dtype=torch.float16)}, [1, 2.5, None]))
    back = restricted_loads(dumps(msg))
    assert torch.equal(back[2][0], msg[2][0]) and back[2][1]["x"].dtype == torch.float16
    with pytest.raises(RefusedObject, match="must be plain torch.Tensor"):
        restricted_loads(dumps(("outputs", 0, torch.randn(3).as_subclass(SubTensor))))
    with pytest.raises(RefusedObject, match="Parameter"):
        restricted_loads(dumps(("outputs", 0, torch.nn.Parameter(torch.randn(2)))))
    with pytest.raises(RefusedObject, match="builtins.print"):
        restricted_loads(dumps(Evil()))


def test_timings_summarize_to_a_median_and_spread():
    stats = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats.median_ms == 3.0 and stats.min_ms == 1.0 and stats.max_ms == 100.0 and stats.n == 5
    assert stats.iqr_ms == pytest.approx(2.0)


def test_clock_is_immune_to_later_monkey_patching(monkeypatch):
    import time as time_module

    clock = Clock("cpu")
    monkeypatch.setattr(time_module, "perf_counter", lambda: 0.0)
    assert clock.time_once(lambda: sum(range(20000))) > 0


def test_the_fast_pass_never_accepts_what_the_exact_comparison_rejects():
    from kag.core.eval.judge.compare import _all_close_fast, _outside

    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        ref = (torch.randn(20000, generator=gen) * 10).to(dtype)
        atol, rtol = 1e-2, 1e-2
        bound = atol + rtol * ref.double().abs()
        # differences straddling the bound by a relative 1e-7: the exact path decides each
        for scale in (1 - 1e-3, 1 - 1e-7, 1.0, 1 + 1e-7, 1 + 1e-3):
            out = (ref.double() + bound * scale).to(dtype)
            exact_ok = not bool(_outside(ref.reshape(-1), out.reshape(-1), False, atol, rtol)[0].any())
            if _all_close_fast(ref.reshape(-1), out.reshape(-1), atol, rtol):
                assert exact_ok, (dtype, scale)
        assert _all_close_fast(ref, ref.clone(), atol, rtol)
        if dtype in (torch.float32, torch.float64):  # well inside the bound: the fast path decides
            assert _all_close_fast(ref, (ref.double() + bound * 0.5).to(dtype), atol, rtol)
    ref = torch.tensor([1.0, 2.0, float("inf")])
    assert not _all_close_fast(ref, ref.clone(), 1e-2, 1e-2)  # infinities take the exact path
    assert compare_outputs(ref, ref.clone(), LOOSE) is None  # which accepts matching ones
    nan_out = torch.tensor([1.0, float("nan"), 3.0])
    assert not _all_close_fast(torch.tensor([1.0, 2.0, 3.0]), nan_out, 1e-2, 1e-2)
