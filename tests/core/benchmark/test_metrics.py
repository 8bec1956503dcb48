import math

import pytest

from kag.core.benchmark.metrics import fast_p, geomean, summarize
from kag.core.records import EvalResult, RewardValue, Violation


def _r(ok: bool, eager: float | None, compile_: float | None, reward: float = 1.0) -> EvalResult:
    return EvalResult(task="t", compiled=ok, correct=ok, speedup_vs_eager=eager, speedup_vs_compile=compile_,
                      reward=RewardValue("milestone", reward if ok else -1.0))


def test_summary_by_hand():
    results = [_r(True, 2.0, 1.5, 3), _r(True, 1.2, 0.8, 2), _r(True, 1.0, 1.04, 1), _r(False, None, None)]
    s = summarize(results)
    assert s.tasks == 4 and s.passed == 3 and s.pass_rate == 0.75
    # faster = time <= 0.95 x baseline: eager speedups 2.0 and 1.2 qualify, 1.0 does not
    assert s.faster_than_eager == 0.5
    # compile: only 1.5 qualifies (1.04 -> 0.9615 of the time, not <= 0.95)
    assert s.faster_than_compile == 0.25
    assert s.geomean_vs_eager == pytest.approx((2.0 * 1.2 * 1.0) ** (1 / 3))
    assert s.geomean_vs_compile == pytest.approx((1.5 * 0.8 * 1.04) ** (1 / 3))
    assert s.mean_reward == pytest.approx((3 + 2 + 1 - 1) / 4)


def test_violations_make_a_result_not_count():
    bad = _r(True, 5.0, 5.0)
    bad.violations.append(Violation("no-torch-fallback", "model_new.py:3 torch.relu"))
    assert summarize([bad]).passed == 0


def test_fast_p_counts_over_all_tasks():
    results = [_r(True, 2.0, 1.5), _r(True, 1.2, 0.8), _r(False, None, None), _r(True, 1.0, 1.0)]
    assert fast_p(results, 0.0) == 0.75
    assert fast_p(results, 1.0) == 0.25
    assert fast_p(results, 1.0, baseline="eager") == 0.5
    assert fast_p([], 1.0) == 0.0


def test_geomean_ignores_missing():
    assert geomean([]) is None
    assert math.isclose(geomean([4.0, None, 1.0]), 2.0)
