"""The arithmetic of the judge's timing (kag.core.eval.judge_timing): calibration, the fold of work done
at hand-over, the skipped-work and cross-check rules, and the chance that rechecks catch a
solution that works on 2 of 3 calls."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from kag.core.eval.judge_timing import (FAST_MIN_SHARE, RECHECKED, RESOLUTION_SHARE, CandidateTiming, PathCalibration,
                                   choose_rechecked, cross_check, fold_threshold_s, resolution_s, skipped_work)

CAL = PathCalibration(null_s=[30e-6] * 50, post_s=[1e-3, 1.05e-3, 0.98e-3, 1.01e-3, 1.0e-3])


def test_estimates_subtract_the_null_path_and_fold_nothing_for_honest_hand_overs():
    timing = CandidateTiming(windows_s=[1e-3 + 30e-6] * 20, post_s=[1.02e-3] * 12)
    estimates, fold = timing.estimates_s(CAL)
    assert fold == 0.0 and all(abs(e - 1e-3) < 1e-12 for e in estimates)


def test_work_done_when_an_output_is_asked_for_counts_on_every_call():
    """A lazy solution: nothing in the call (window = the null path), the whole 4 ms computed when
    the judge asks for the output. Its time is 4 ms, not 0."""
    timing = CandidateTiming(windows_s=[30e-6] * 100, post_s=[1e-3 + 4e-3] * 12)
    estimates, fold = timing.estimates_s(CAL)
    assert abs(fold - 4e-3) < 1e-4 and min(estimates) > 3.9e-3  # the whole difference, no slack taken off


def _calibration(rng: random.Random, median_s: float, spread_s: float, n: int = 12) -> PathCalibration:
    return PathCalibration(null_s=[30e-6] * 50, post_s=[median_s + rng.gauss(0, spread_s) for _ in range(n)])


def test_a_lazy_output_cannot_hide_its_kernel_in_a_long_hand_over():
    """The H100 case: a 128 MB ReLU output handed over in ~1 ms (10 us of jitter); the lazy
    solution writes it (85 us) when asked. A slack of 10% of the hand-over hid it (reward 3)."""
    rng = random.Random(1)
    for _ in range(50):
        cal = _calibration(rng, 1e-3, 10e-6)
        lazy = CandidateTiming(windows_s=[45e-6] * 100, post_s=[1e-3 + 85e-6 + rng.gauss(0, 10e-6) for _ in range(12)])
        estimates, fold = lazy.estimates_s(cal)
        assert 60e-6 < fold < 110e-6 and statistics.median(estimates) > 70e-6


def test_widening_its_own_hand_overs_does_not_buy_a_solution_slack():
    """The threshold comes from the calibration (taken before the solution was imported), not
    from the hand-overs the solution controls: jitter it adds only adds to what it is charged."""
    rng = random.Random(2)
    cal = _calibration(rng, 1e-3, 10e-6)
    noisy = [1e-3 + 85e-6 + rng.uniform(0, 2e-3) for _ in range(12)]
    _, fold = CandidateTiming(windows_s=[45e-6] * 100, post_s=noisy).estimates_s(cal)
    assert fold > 85e-6
    assert fold_threshold_s(cal.post_s, 12) < 30e-6


def test_honest_hand_overs_are_seldom_charged_and_then_only_their_noise():
    rng = random.Random(3)
    charged = []
    for _ in range(500):
        cal = _calibration(rng, 1e-3, 10e-6)
        honest = CandidateTiming(windows_s=[100e-6] * 100, post_s=[1e-3 + rng.gauss(0, 10e-6) for _ in range(12)])
        _, fold = honest.estimates_s(cal)
        if fold:
            charged.append(fold)
    assert len(charged) <= 10  # 2% (3 standard errors, estimated from 12 calibrations)
    assert all(f < 40e-6 for f in charged)


def test_the_checks_floor_is_their_windows_alone():
    timing = CandidateTiming(windows_s=[1e-3 + 30e-6] * 5, post_s=[5e-3] * 5)
    estimates, fold = timing.estimates_s(CAL, with_fold=False)
    assert fold == 0.0 and all(abs(e - 1e-3) < 1e-12 for e in estimates)


def test_a_cluster_of_fast_calls_is_skipped_work_but_jitter_and_load_are_not():
    rng = random.Random(0)
    honest = [2e-3 * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(100)]
    assert skipped_work(honest, honest[:12]) is None
    tiny = [10e-6 + 4e-6 * rng.random() for _ in range(100)]  # tiny kernels jitter by a third
    assert skipped_work(tiny, tiny[:12]) is None
    # a loaded machine: most calls wait to be scheduled (3.4 ms), some run at their real 1 ms
    loaded = [1e-3 if i % 4 == 0 else 3.4e-3 for i in range(100)]
    assert skipped_work(loaded, [loaded[i] for i in range(0, 100, 8)]) is None
    # an honest ~0.1 ms kernel on a shared H100: 5 of 100 windows came out 0.042 ms (the context switch
    # the null path calibrates was cheaper on those calls); the median, the verdict, is untouched
    shared = [0.042e-3 if i % 20 == 7 else 0.103e-3 * (1 + 0.1 * rng.random()) for i in range(100)]
    assert skipped_work(shared, [shared[i] for i in range(0, 100, 8) if i % 20 != 7]) is None
    partial = [2e-3 if i % 3 else 20e-6 for i in range(100)]  # works on 2 of 3 calls
    verified = [partial[i] for i in range(100) if i % 3][:12]  # the checked calls all did the work
    assert "some calls only" in (skipped_work(partial, verified) or "")
    fifth = [2e-3 if i % 5 else 20e-6 for i in range(100)]  # skips one call in five: still a cluster
    assert "some calls only" in (skipped_work(fifth, [fifth[i] for i in range(1, 100, 5)][:12]) or "")


def test_fast_calls_under_the_cluster_share_cannot_move_the_median_out_of_the_honest_spread():
    """Why the share may be a fifth: the verdict is the median, and fewer fast calls than that leave
    it among the honest calls' own times (their 37.5th percentile at worst)."""
    rng = random.Random(1)
    draw = lambda: 1e-3 * (1 + 0.05 * rng.gauss(0, 1))  # noqa: E731 - one honest call
    honest = sorted(draw() for _ in range(10_000))
    n_fast = math.ceil(FAST_MIN_SHARE * 100) - 1  # the most skipped calls the rule lets through
    medians = [statistics.median([1e-6] * n_fast + [draw() for _ in range(100 - n_fast)]) for _ in range(200)]
    assert statistics.mean(medians) >= honest[3_500]  # about the honest calls' 38th percentile
    assert min(medians) >= honest[1_500]  # within their spread, every time
    assert honest[5_000] - statistics.mean(medians) < 0.05 * honest[5_000] * 0.5  # under half a sigma faster


def test_the_candidates_own_clock_is_only_a_cross_check():
    assert cross_check([1.9] * 50, 2.0) is None  # honest: its own timer sees a bit less (no overhead)
    assert cross_check([0.04] * 50, 4.0) is not None  # scaled by 1/100
    assert cross_check([0.005] * 50, 0.02) is None  # tiny kernels: within the absolute slack


def test_rechecks_catch_work_on_two_of_three_calls_99_percent_of_the_time():
    assert RECHECKED >= 12 and (2 / 3) ** RECHECKED <= 0.01
    caught = 0
    for trial in range(2000):
        chosen = choose_rechecked(100, True)
        skipped = {i for i in range(100) if (i + trial) % 3 == 0}  # the calls it skips
        caught += bool(chosen & skipped)
    assert caught / 2000 >= 0.99, caught
    assert choose_rechecked(100, False) == set() and len(choose_rechecked(5, True)) == 5


def test_no_call_is_credited_below_a_quarter_of_the_paths_own_cost():
    cal = PathCalibration(null_s=[400e-6, 380e-6, 420e-6])  # an H100's path: about 0.4 ms a call
    assert RESOLUTION_SHARE == 0.25 and resolution_s(cal) == pytest.approx(100e-6)
    assert resolution_s(PathCalibration()) == 0.0  # no calibration, no floor
