"""The local executor and job plumbing: real threads, real functions named 'module:function'."""

import os
import threading

import pytest

from kag.core.executor import Job, LocalExecutor, call_job, resolve, worker_plugins


def test_outcomes_come_in_completion_order_and_a_raising_job_is_a_failed_outcome():
    release = threading.Event()
    jobs = [Job("slow", release.wait, {"timeout": 30}), Job("pid", "os:getpid"),
            Job("bad", "os:getpid", {"nope": 1})]
    executor = LocalExecutor()
    seen = []
    for outcome in executor.map_unordered(jobs, workers=3):
        seen.append(outcome)
        if len(seen) == 2:
            release.set()  # the slow job ends only after both others were handed back
    assert [o.key for o in seen][2] == "slow" and {o.key for o in seen[:2]} == {"pid", "bad"}
    by_key = {o.key: o for o in seen}
    assert by_key["pid"].value == os.getpid() and by_key["pid"].error is None
    assert by_key["bad"].value is None and by_key["bad"].error.startswith("TypeError:")
    assert (executor.stats.jobs, executor.stats.workers, executor.stats.retries) == (3, 3, 0)


def test_closing_the_outcomes_early_does_not_wait_for_jobs_in_flight():
    release = threading.Event()
    outcomes = LocalExecutor().map_unordered([Job("quick", "os:getpid"), Job("stuck", release.wait, {"timeout": 60})],
                                             workers=2)
    assert next(outcomes).key == "quick"
    outcomes.close()  # what Ctrl-C in the consumer does: returns at once, 'stuck' still waits
    release.set()


def test_functions_are_named_module_colon_function():
    assert resolve("os.path:join")("a", "b") == os.path.join("a", "b")
    assert call_job("os.path", {}) == (None, "ValueError: a job's function is 'module:function', got 'os.path'")
    with pytest.raises(AttributeError):
        resolve("os:no_such_function")


def test_workers_build_the_plugins_once_per_selection():
    first = worker_plugins({"reward": ["speedup"]})
    assert first is worker_plugins({"reward": ["speedup"]}) and first.selected("reward") == "speedup"
    assert worker_plugins({"reward": ["milestone"]}).selected("reward") == "milestone"
