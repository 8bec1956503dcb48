"""The ``ray`` executor: jobs on a Ray cluster, one worker per GPU, outcomes in completion order.

Trusted side: the driver (this process) sends each job (a kag function's name and plain data) to a
worker, a Ray actor that owns one GPU (``num_gpus=1``; one CPU on the cpu backend), keeps a judge
warm and runs the job there: the same trusted evaluator as a local run, every candidate still in
its own confined process. Faults: a worker (or its node) that dies under a job costs the job a
retry on a fresh worker, up to ``max_retries``, never the run; a job whose value asks for it
(``RESTART_WORKER``: a candidate left a sticky CUDA error) gets its worker replaced. Both are
counted in ``stats``. Ray is optional: ``pip install 'kag[ray]'``.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import uuid
from collections import deque
from typing import Any, Iterable, Iterator

from kag.plugin import (JUDGES_PER_EPISODE, ExecutorStats, Job, JobOutcome, PluginError, call_job, hookimpl,
                        wants_restart)

NAMESPACE = "kag"  # workers are named actors here: kag-<run>-w<slot>.<generation>
TIMELINE_ENV = "KAG_TIMELINE"  # kag eval --timeline's file (kag.core.timeline): passed to each worker


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise PluginError("the ray executor needs Ray: pip install 'kag[ray]'") from None
    return ray


class Settled:
    """What a job's result read from its worker means (``settle``): its outcome (None: run it again
    on a fresh worker) and whether its worker must be replaced; ``lost`` and ``restart`` for the stats."""

    def __init__(self, outcome: JobOutcome | None, replace: bool, lost: bool = False, restart: bool = False) -> None:
        self.outcome, self.replace, self.lost, self.restart = outcome, replace, lost, restart


def settle(read: Any, job: Job, attempts: int, worker: str, max_retries: int) -> Settled:
    """Read a job's result (``read()``) and judge it, the same for ``map_unordered`` and sessions:
    a lost worker costs the job a retry while ``attempts`` <= ``max_retries``; a result that cannot
    be read fails the job only (its worker's state is not to be trusted: replaced); a value that
    asks for it (RESTART_WORKER) gets its worker replaced."""
    from ray.exceptions import RayActorError, RayError, WorkerCrashedError

    try:
        value, error = read()
    except RayError as exc:
        if not isinstance(exc, (RayActorError, WorkerCrashedError)):  # out of memory, a bad object
            return Settled(JobOutcome(job.key, error=f"{type(exc).__name__}: {str(exc)[:500]}", attempts=attempts,
                                      worker=worker), replace=True)
        if attempts <= max_retries:
            return Settled(None, replace=True, lost=True)
        return Settled(JobOutcome(job.key, error=f"WorkerLost: its worker died {attempts} times ({type(exc).__name__})",
                                  attempts=attempts, worker=worker), replace=True, lost=True)
    restart = wants_restart(value)
    return Settled(JobOutcome(job.key, value, error, attempts=attempts, worker=worker), replace=restart, restart=restart)


class RayWorker:
    """One Ray actor: holds its GPU for the whole run, with a judge started ahead of each job."""

    def __init__(self, warm_judges: int, omp_threads: str | None, timeline: str | None = None) -> None:
        self.current: str | None = None
        # Ray sets OMP_NUM_THREADS=1 in its workers; evaluations here must time as a local run does
        if omp_threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp_threads
        if timeline:  # the driver's --timeline file: a worker of a cluster started before has not got it
            os.makedirs(os.path.dirname(timeline) or ".", exist_ok=True)
            os.environ[TIMELINE_ENV] = timeline  # set before any judge starts: they inherit it
        if warm_judges:
            from kag.plugin import keep_judges_warm

            keep_judges_warm(warm_judges)

    def info(self) -> dict[str, Any]:
        """Who and where this worker is, and the job it runs (answered while a job runs)."""
        import ray

        from kag.plugin import KAG_VERSION

        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(), "current": self.current,
                "gpus": [str(g) for g in ray.get_gpu_ids()], "kag_version": KAG_VERSION}

    def run(self, key: str, fn: str, args: dict[str, Any]) -> tuple[Any, str | None]:
        self.current = key
        try:
            return call_job(fn, args)
        finally:
            self.current = None


class RayExecutor:
    """Jobs on the Ray cluster at ``address`` (None: ``RAY_ADDRESS``, else a local cluster started
    for the run and stopped after it)."""

    name = "ray"

    def __init__(self, address: str | None = None, max_retries: int = 2, worker_start_timeout_s: float = 300.0):
        self.address = address
        self.max_retries = max_retries
        self.worker_start_timeout_s = worker_start_timeout_s
        self.stats = ExecutorStats(executor=self.name)
        self.run_id = uuid.uuid4().hex[:8]

    @staticmethod
    def check_available() -> str | None:
        try:
            import ray  # noqa: F401
        except ImportError:
            return "Ray is not installed: pip install 'kag[ray]'"
        return None

    # -- the cluster -------------------------------------------------------------------------
    def _connect(self, ray: Any, workers: int) -> bool:
        """Join the cluster (or start a local one); True when this run started it."""
        if ray.is_initialized():
            return False
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        options: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING,
                                   "configure_logging": False}
        if address is None:  # a new local cluster (not one `ray start` left here), sized so every worker fits
            options.update(num_cpus=max(os.cpu_count() or 1, workers), include_dashboard=False)
        try:
            ray.init(address=address or "local", **options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise PluginError(f"cannot join the Ray cluster at {address}: {exc}; check --ray-address "
                              f"(ray start --head prints it)") from None
        return address is None

    def _worker_count(self, ray: Any, workers: int | None, gpu: bool) -> int:
        if not gpu:
            return max(1, workers or 1)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus < 1:
            raise PluginError("the Ray cluster has no GPU; start its nodes with GPUs or use --backend cpu")
        return min(gpus, workers) if workers else gpus

    def _start(self, ray: Any, slots: dict[int, int], gpu: bool) -> dict[int, Any]:
        """Fresh workers for ``slots`` (slot -> generation), started together; those ready in time."""
        launched = {}
        for slot, generation in slots.items():
            launched[slot] = ray.remote(RayWorker).options(
                name=f"kag-{self.run_id}-w{slot}.{generation}", namespace=NAMESPACE, max_restarts=0,
                max_concurrency=2,  # ``info`` answers while ``run`` works
                num_gpus=1 if gpu else 0, num_cpus=1).remote(
                    JUDGES_PER_EPISODE if gpu else 0, os.environ.get("OMP_NUM_THREADS"), os.environ.get(TIMELINE_ENV))
        infos = {slot: actor.info.remote() for slot, actor in launched.items()}
        ready = {}
        from kag.plugin import KAG_VERSION

        for slot, actor in launched.items():
            try:
                info = ray.get(infos[slot], timeout=self.worker_start_timeout_s)
            except Exception:  # noqa: BLE001 - GetTimeoutError (no room on the cluster), or it died starting
                ray.kill(actor, no_restart=True)
                continue
            if info["kag_version"] != KAG_VERSION:
                for other in launched.values():
                    ray.kill(other, no_restart=True)
                raise PluginError(f"the Ray workers run kag {info['kag_version']}, this driver kag "
                                  f"{KAG_VERSION}: install the same kag on every node")
            ready[slot] = actor
        return ready

    # -- the run -----------------------------------------------------------------------------
    def map_unordered(self, jobs: Iterable[Job], workers: int | None = None, gpu: bool = False) -> Iterator[JobOutcome]:
        """Outcomes in completion order; closing the iterator (Ctrl-C) stops every worker at once."""
        ray = _import_ray()

        pending: deque[Job] = deque(jobs)
        for job in pending:
            if callable(job.fn):
                raise PluginError(f"the ray executor runs jobs by name ('module:function'); job {job.key!r} has a "
                                  f"callable: use --plugin executor=local")
        self.stats.jobs = len(pending)
        if not pending:
            return
        started_here = self._connect(ray, workers or 1)
        attempts: dict[str, int] = {}
        actors: dict[int, Any] = {}
        generation: dict[int, int] = {}
        running: dict[Any, tuple[int, Job]] = {}
        interrupted = False
        try:
            generation.update({slot: 0 for slot in range(min(self._worker_count(ray, workers, gpu), len(pending)))})
            actors.update(self._start(ray, generation, gpu))
            self.stats.workers = len(actors)
            while pending or running:
                busy = {slot for slot, _ in running.values()}
                for slot in [s for s in actors if s not in busy]:
                    if not pending:
                        break
                    job = pending.popleft()
                    attempts[job.key] = attempts.get(job.key, 0) + 1
                    running[actors[slot].run.remote(job.key, job.fn, dict(job.args))] = (slot, job)
                if not running:  # no worker left to run what is queued
                    while pending:
                        job = pending.popleft()
                        yield JobOutcome(job.key, error="RuntimeError: no Ray worker could be started",
                                         attempts=attempts.get(job.key, 0))
                    break
                (ref,), _ = ray.wait(list(running), num_returns=1)
                slot, job = running.pop(ref)
                done = settle(lambda: ray.get(ref), job, attempts[job.key], f"ray:w{slot}.{generation[slot]}",
                              self.max_retries)
                self.stats.lost_workers += done.lost
                self.stats.restarted_workers += done.restart
                if done.replace:
                    self._replace(ray, actors, generation, slot, gpu)
                if done.outcome is None:
                    self.stats.retries += 1
                    pending.appendleft(job)
                    continue
                yield done.outcome
        except KeyboardInterrupt:  # the same Ctrl-C reached a local cluster: the caller kills what is left
            interrupted = True
            raise
        finally:
            if not interrupted:
                self._stop(ray, actors, started_here)

    def session(self, workers: int | None = None, gpu: bool = False) -> "RaySession":
        """The cluster's workers held for jobs that come one at a time (``RaySession.call``)."""
        return RaySession(self, workers, gpu)

    @staticmethod
    def _stop(ray: Any, actors: dict[int, Any], started_here: bool) -> None:
        """The run's workers killed, and the local cluster stopped if this run started it."""
        for actor in actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if started_here:
            ray.shutdown()

    def _replace(self, ray: Any, actors: dict[int, Any], generation: dict[int, int], slot: int, gpu: bool) -> None:
        try:
            ray.kill(actors.pop(slot), no_restart=True)
        except Exception:  # noqa: BLE001 - a dead actor
            pass
        generation[slot] += 1
        actors.update(self._start(ray, {slot: generation[slot]}, gpu))


class RaySession:
    """Workers started once and lent to ``call``s from any thread: a call waits for an idle worker,
    runs its job there and gives the worker back; the same faults as ``map_unordered`` (a lost
    worker: replaced, the job retried up to ``max_retries``; RESTART_WORKER: replaced)."""

    def __init__(self, executor: RayExecutor, workers: int | None, gpu: bool) -> None:
        self.ray = ray = _import_ray()
        self.ex, self.gpu = executor, gpu
        self.stats = executor.stats = ExecutorStats(executor=executor.name)
        self.started_here = executor._connect(ray, workers or 1)
        self.lock = threading.Lock()
        self.closed = False
        self.idle: queue.Queue[int] = queue.Queue()
        self.generation = {slot: 0 for slot in range(executor._worker_count(ray, workers, gpu))}
        self.actors: dict[int, Any] = {}
        try:
            self.actors.update(executor._start(ray, self.generation, gpu))
        except BaseException:
            self.close()
            raise
        if not self.actors:
            self.close()
            raise PluginError("no Ray worker could be started on the cluster (no free CPU or GPU there?)")
        self.stats.workers = len(self.actors)
        for slot in self.actors:
            self.idle.put(slot)

    def _take(self) -> int | None:
        """An idle worker's slot; None once no worker is left to wait for."""
        while True:
            try:
                return self.idle.get(timeout=1.0)
            except queue.Empty:
                with self.lock:
                    if not self.actors:
                        return None

    def _replace(self, slot: int) -> None:
        with self.lock:
            if self.closed:  # a call that was in flight at close(): no new worker
                return
            self.ex._replace(self.ray, self.actors, self.generation, slot, self.gpu)
            alive = slot in self.actors
        if alive:
            self.idle.put(slot)

    def call(self, job: Job) -> JobOutcome:
        if callable(job.fn):
            raise PluginError(f"the ray executor runs jobs by name ('module:function'); job {job.key!r} has a "
                              f"callable: use the local executor")
        with self.lock:
            self.stats.jobs += 1
        attempts = 0
        while True:
            slot = self._take()
            if slot is None:
                return JobOutcome(job.key, error="RuntimeError: no Ray worker is left to run it", attempts=attempts)
            attempts += 1
            with self.lock:
                if self.closed:
                    return JobOutcome(job.key, error="RuntimeError: the executor session was closed", attempts=attempts)
                actor, worker = self.actors[slot], f"ray:w{slot}.{self.generation[slot]}"
            done = settle(lambda: self.ray.get(actor.run.remote(job.key, job.fn, dict(job.args))), job, attempts,
                          worker, self.ex.max_retries)
            with self.lock:
                self.stats.lost_workers += done.lost
                self.stats.restarted_workers += done.restart
                self.stats.retries += done.outcome is None
            if done.replace:
                self._replace(slot)
            else:
                self.idle.put(slot)
            if done.outcome is not None:
                return done.outcome

    def close(self) -> None:
        """The workers killed, and the local cluster stopped if this session started it."""
        with self.lock:
            self.closed = True
            actors, self.actors = dict(self.actors), {}
        self.ex._stop(self.ray, actors, self.started_here)
        self.started_here = False

    def __enter__(self) -> "RaySession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@hookimpl
def kag_register_executors(register) -> None:
    register("ray", RayExecutor)
