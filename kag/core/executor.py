"""Jobs for the ``executor`` plugin kind: what ``kag eval``, ``kag data filter`` and the RL stages
hand to an executor, which runs them in threads of this process (``local``) or in worker processes
of a Ray cluster (``ray``). Two ways in: ``map_unordered`` for a known set of jobs (outcomes in
completion order), and ``session`` for jobs that arise one at a time from the caller's own threads
(an RL stage's environments asking for verdicts): ``session.call(job)`` blocks until its outcome.

Trusted side. A job names a trusted kag function (``module:function``) and carries plain data, so
a worker process rebuilds everything from names (``worker_plugins``) and no plugin object is ever
pickled; that function runs the same trusted evaluator as a local run, which keeps every
candidate in its own confined process. No solution code runs in an executor's worker itself.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Callable, Iterable, Iterator, Mapping

import attrs

# A job's value (a dict) with this key true asks the executor to replace the worker that ran it,
# e.g. after a candidate left a sticky CUDA error on the worker's GPU.
RESTART_WORKER = "restart_worker"


@attrs.frozen
class Job:
    """One unit of work. ``fn`` is ``"module:function"`` (called as ``fn(**args)``, ``args`` plain
    data); an in-process callable is accepted only by executors that run jobs in this process."""

    key: str
    fn: str | Callable[..., Any]
    args: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class JobOutcome:
    """What a job gave: its ``value``, or ``error`` ("Type: message") when it raised or was lost."""

    key: str
    value: Any = None
    error: str | None = None
    attempts: int = 1
    worker: str = ""


@attrs.define
class ExecutorStats:
    """Counts of one executor run, for the run's summary."""

    executor: str = ""
    workers: int = 0
    jobs: int = 0
    retries: int = 0           # jobs started again after their worker died
    lost_workers: int = 0      # workers (or their nodes) that died under a job
    restarted_workers: int = 0  # workers replaced on a job's request (RESTART_WORKER)


def resolve(fn: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(fn):
        return fn
    module, sep, name = fn.partition(":")
    if not sep:
        raise ValueError(f"a job's function is 'module:function', got {fn!r}")
    return getattr(importlib.import_module(module), name)


def call_job(fn: str | Callable[..., Any], args: Mapping[str, Any]) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, "Type: message")`` when the job raised: one broken job costs
    one failed outcome, never the run."""
    try:
        return resolve(fn)(**args), None
    except Exception as exc:  # noqa: BLE001 - reported as the job's outcome
        return None, f"{type(exc).__name__}: {exc}"


def wants_restart(value: Any) -> bool:
    return isinstance(value, dict) and bool(value.get(RESTART_WORKER))


_PLUGINS: dict[str, Any] = {}
_PLUGINS_LOCK = threading.Lock()


def worker_plugins(selection: Mapping[str, list[str]]) -> Any:
    """The plugin manager for ``selection`` (``Plugins.names_selected()``), built once per process."""
    from kag.core.plugins import Plugins

    key = repr(sorted((k, tuple(v)) for k, v in selection.items()))
    with _PLUGINS_LOCK:
        if key not in _PLUGINS:
            _PLUGINS[key] = Plugins.from_names(selection)
        return _PLUGINS[key]


class LocalSession:
    """Jobs run in the calling thread: the caller's own threads are the concurrency (each
    evaluation still takes its device from this machine's GPU pool)."""

    def __init__(self, stats: ExecutorStats) -> None:
        self.stats = stats
        self._lock = threading.Lock()

    def call(self, job: Job) -> JobOutcome:
        with self._lock:
            self.stats.jobs += 1
        value, error = call_job(job.fn, job.args)
        return JobOutcome(job.key, value, error, worker="local")

    def close(self) -> None:
        """Nothing to stop: no worker outlives a call."""

    def __enter__(self) -> "LocalSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor:
    """Jobs in threads of this process (today's ``kag eval --concurrency N``): the default executor.

    Each job's evaluations still run in their own judge and candidate processes, sharing this
    machine's GPU pool; a job's callable may be an in-process closure."""

    name = "local"

    def __init__(self) -> None:
        self.stats = ExecutorStats(executor=self.name)

    def session(self, workers: int | None = None, gpu: bool = False) -> LocalSession:
        """Jobs one at a time from the caller's threads (see the module's docstring)."""
        self.stats = ExecutorStats(executor=self.name, workers=max(1, workers or 1))
        return LocalSession(self.stats)

    def map_unordered(self, jobs: Iterable[Job], workers: int = 1, gpu: bool = False) -> Iterator[JobOutcome]:
        """Outcomes in completion order. Closing the iterator early (Ctrl-C in the consumer) drops
        the queued jobs and returns without waiting for the running ones."""
        from concurrent.futures import ThreadPoolExecutor, as_completed

        self.stats.workers = max(1, workers)
        pool = ThreadPoolExecutor(max_workers=self.stats.workers, thread_name_prefix="kag-job")
        try:
            futures = {pool.submit(call_job, job.fn, job.args): job for job in jobs}
            self.stats.jobs = len(futures)
            for fut in as_completed(futures):
                value, error = fut.result()
                yield JobOutcome(futures[fut].key, value, error, worker=self.name)
        except BaseException:  # KeyboardInterrupt, GeneratorExit: do not wait for the jobs in flight
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
