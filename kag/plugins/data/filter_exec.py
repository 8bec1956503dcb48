"""The ``exec`` filter: keep a task only if running it says it is a usable RL task.

Checks, cheapest first: it loads and runs in eager; the same inputs give identical outputs (no
dropout or random ops); outputs are finite, not constant, and differ for different inputs; eager
time lies in a window; torch.compile runs it with the same outputs. Each task runs in a worker
process (spawned; one per GPU on CUDA) that is killed and replaced when it passes the timeout.
Workers die with the process that started them, however it dies (see ``_die_with_parent``).
Trusted data-pipeline side: the tasks are composed from crawled seeds, not agent solutions.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import threading
import time
from typing import Any, Callable, Iterable, Iterator

from kag.plugin import SynthesisError, hookimpl

CHECK_BATCH_FN = "kag.plugins.data.filter_exec:check_batch"  # a batch of tasks as an executor job
GPU_WINDOW_MS = (1.0, 100.0)
CPU_WINDOW_MS = (0.1, 100.0)
# a task's waits for machine-wide slots, at most (both slots' own bounds): past it the task is overdue
MAX_WAIT_S = 900.0 + 300.0


class Reject(Exception):
    """A task fails a check; ``reason`` is the counted category, the message the detail."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(detail or reason)
        self.reason = reason


def _tensors(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    raise Reject("non_tensor_output", f"forward returns {type(out).__name__}")


def _identical(a: Any, b: Any) -> bool:
    """Bitwise-equal outputs, NaN positions included (NaNs are judged by the finiteness check)."""
    import torch

    if a.is_floating_point() or a.is_complex():
        return bool(torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))
    return bool(torch.equal(a, b))


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_eager(model: Any, inputs: list[Any], device: str, budget_s: float = 1.0, max_iters: int = 50) -> float:
    """Median milliseconds of ``model(*inputs)`` (a warm-up call, then up to ``budget_s`` of calls)."""
    import statistics

    model(*inputs)
    _sync(device)
    times, start = [], time.perf_counter()
    while len(times) < 3 or (len(times) < max_iters and time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        model(*inputs)
        _sync(device)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def timing_slot(device: str) -> Any:
    """The machine-wide timing slot of ``device`` ("cpu", "cuda:<i>"), shared with ``kag score``,
    ``kag serve`` and ``kag eval`` (kag.core.eval.orchestrator.timing_lock)."""
    from kag.plugin import list_gpus
    from kag.plugin import TimingSlot, slot_name

    visible = None
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        gpus = list_gpus()
        visible = gpus[index] if index < len(gpus) else str(index)
    return TimingSlot(slot_name(device, visible))



def check_task(code: str, device: str, window_ms: tuple[float, float], compile_backend: str = "inductor",
               atol: float = 1e-3, rtol: float = 1e-3, distinct_rtol: float = 1e-3,
               timing_lock: Any = None, waiting: Callable[[bool], None] = lambda _on: None) -> dict[str, Any]:
    """Run every check on one task; raises Reject with the first failure, else returns measurements.
    ``waiting(True)`` / ``waiting(False)`` bracket each wait for a machine-wide slot: the task's
    clock stops meanwhile (another process's timing is not this task's time)."""
    import torch

    from kag.plugin import host_work
    from kag.plugin import load_module

    try:
        ns = load_module(code, "<candidate>")
        torch.manual_seed(0)
        model = ns["Model"](*ns["get_init_inputs"]()).to(device)
        torch.manual_seed(1)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
        torch.manual_seed(2)
        other = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
    except Exception as exc:  # noqa: BLE001
        raise Reject("load_error", f"{type(exc).__name__}: {exc}") from None
    with torch.no_grad():
        try:
            torch.manual_seed(100)
            out1 = _tensors(model(*inputs))
            torch.manual_seed(200)
            out2 = _tensors(model(*inputs))
            out_other = _tensors(model(*other))
        except Reject:
            raise
        except Exception as exc:  # noqa: BLE001
            raise Reject("eager_error", f"{type(exc).__name__}: {exc}") from None
        if any(a.shape != b.shape or not _identical(a, b) for a, b in zip(out1, out2)):
            raise Reject("nondeterministic", "same inputs gave different outputs (dropout or random ops?)")
        floats = [t.float() for t in out1]
        if any(not torch.isfinite(t).all() for t in floats):
            raise Reject("non_finite_output", "output has NaN or Inf")
        if all(t.numel() <= 1 or bool(t.max() == t.min()) for t in floats):
            raise Reject("constant_output", "every output element is the same")
        diff = sum(float((a.float() - b.float()).norm()) for a, b in zip(out1, out_other))
        scale = sum(float(a.norm()) for a in floats) or 1.0
        if diff <= distinct_rtol * scale:
            raise Reject("indistinguishable", f"different inputs give outputs within {diff / scale:.2e} (relative)")
        try:  # the machine-wide timing slot of the device: no kag timing or heavy work alongside
            waiting(True)
            with timing_slot(device).exclusive() if timing_lock is None else timing_lock:
                waiting(False)
                eager_ms = time_eager(model, inputs, device)
        except Exception as exc:  # noqa: BLE001
            raise Reject("eager_error", f"timing: {type(exc).__name__}: {exc}") from None
        lo, hi = window_ms
        if eager_ms < lo:
            raise Reject("too_fast", f"eager {eager_ms:.3f} ms < {lo} ms")
        if eager_ms > hi:
            raise Reject("too_slow", f"eager {eager_ms:.3f} ms > {hi} ms")
        try:  # compiling is heavy work: not while a timing on this host's CPU runs
            waiting(True)
            with host_work():
                waiting(False)
                compiled = torch.compile(model, backend=compile_backend)
                outc = _tensors(compiled(*inputs))
        except Exception as exc:  # noqa: BLE001
            raise Reject("compile_error", f"{type(exc).__name__}: {str(exc)[:300]}") from None
        for a, b in zip(out1, outc):
            if a.shape != b.shape or not torch.allclose(a.float(), b.float(), atol=atol, rtol=rtol):
                err = float((a.float() - b.float()).abs().max()) if a.shape == b.shape else float("nan")
                raise Reject("compile_mismatch", f"torch.compile output differs (max abs err {err:.3e})")
    return {"eager_ms": round(eager_ms, 4), "output_shapes": [list(t.shape) for t in out1]}


def _die_with_parent() -> None:
    """Make this worker a process group and kill the group when the parent process dies.

    A killed parent (SIGKILL, or SIGTERM, whose default action skips every ``finally``) cannot stop
    its workers, and a ``daemon`` flag only acts at a normal exit. ``multiprocessing`` gives each
    spawned child a sentinel: the read end of a pipe whose write end only the parent holds, so it
    reads EOF the moment the parent is gone, by any signal, with no race (EOF is already there if
    the parent died first). A thread waits on it and kills the worker's own process group, which
    takes anything the task or torch started below the worker with it (PR_SET_PDEATHSIG would kill
    the worker alone, on Linux alone, and fires when the spawning *thread* exits). With the workers
    gone, the multiprocessing resource tracker reads EOF too and exits. Its own group also keeps a
    terminal's Ctrl-C away from the worker: the parent stops it.
    """
    parent = mp.parent_process()
    if parent is None:  # run in-process (tests call check_task directly): nothing to watch
        return
    os.setpgid(0, 0)

    def watch() -> None:
        from multiprocessing.connection import wait

        wait([parent.sentinel])
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="parent-death-watch", daemon=True).start()


def _kill(proc: Any) -> None:
    """Kill a worker and its process group (what its task started), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # not yet its own group: the worker alone
        proc.kill()
    proc.join(5)


def _worker_main(wid: int, device: str, threads: int, config: dict[str, Any], inbox: Any, outbox: Any,
                 timing_lock: Any = None) -> None:
    """Worker process loop: announce readiness, then check tasks one at a time."""
    import warnings

    _die_with_parent()

    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # parallelism comes from the pool

    import torch

    warnings.filterwarnings("ignore")
    torch.set_num_threads(threads)
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    try:  # pay dynamo's start-up once, outside any task's timeout
        torch.compile(lambda t: torch.relu(t) + 1, backend=config["compile_backend"])(torch.ones(4, device=device))
    except Exception:  # noqa: BLE001 - a broken backend shows up as compile_error on each task
        pass
    outbox.put(("ready", wid, None, None))
    while True:
        item = inbox.get()
        if item is None:
            return
        key, code = item
        outbox.put(("start", wid, key, None))
        t0 = time.perf_counter()
        def waiting(on: bool, key: str = key) -> None:
            outbox.put(("waiting" if on else "running", wid, key, None))

        try:
            verdict = {"ok": True, **check_task(code, device, timing_lock=timing_lock, waiting=waiting, **config)}
        except Reject as rej:
            verdict = {"ok": False, "reason": rej.reason, "detail": str(rej)[:500]}
        except BaseException as exc:  # noqa: BLE001 - a task must never kill the worker silently
            verdict = {"ok": False, "reason": "worker_error", "detail": f"{type(exc).__name__}: {exc}"[:500]}
        verdict["check_s"] = round(time.perf_counter() - t0, 3)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        outbox.put(("done", wid, key, verdict))


def resolve_device(device: str, here: bool = True) -> str:
    """``auto`` is this machine's choice; ``here=False`` (the checks run on an executor's workers)
    accepts ``cuda`` on a driver with no GPU."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cuda", "cpu"):
        raise SynthesisError(f"--device takes cuda, cpu or auto, got {device!r}")
    if here and device == "cuda" and not torch.cuda.is_available():
        raise SynthesisError("--device cuda but torch sees no CUDA GPU; use --device cpu or auto")
    return device


class ExecFilter:
    """Execution checks in a pool of isolated worker processes with a per-task timeout.

    On CUDA the default is one worker per GPU; ``workers=N`` puts N workers round-robin on the GPUs
    (compilation is CPU work and overlaps), and the device's machine-wide timing slot
    (kag.core.eval.orchestrator.timing_lock) keeps timing exclusive, across these workers and every other kag
    process; on a CPU machine compiling waits while a timing runs.
    """

    name = "exec"

    def __init__(self, device: str = "auto", workers: int | None = None, timeout_s: float = 180.0,
                 window_ms: tuple[float, float] | str | None = None, compile_backend: str = "inductor",
                 atol: float = 1e-3, rtol: float = 1e-3, batch: int = 8, here: bool = True, **_: Any):
        """``batch``: tasks per job when an executor's workers run the checks (``run_on``); ``here``
        False: this process only hands the checks out (a cuda device need not be on this machine)."""
        self.device = resolve_device(device, here)
        self.batch = max(1, int(batch))
        if isinstance(window_ms, str):
            lo, _, hi = window_ms.partition(",")
            window_ms = (float(lo), float(hi))
        self.window_ms = tuple(window_ms or (GPU_WINDOW_MS if self.device == "cuda" else CPU_WINDOW_MS))
        if self.device == "cuda":
            import torch

            self.slots = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        else:
            self.slots = ["cpu"] * int(workers or max(1, (os.cpu_count() or 1)))
        if workers and self.device == "cuda":
            self.slots = [self.slots[i % len(self.slots)] for i in range(int(workers))]
        self.threads = 1 if self.device == "cpu" else 4
        self.timeout_s = float(timeout_s)
        self.config = {"window_ms": self.window_ms, "compile_backend": compile_backend, "atol": atol, "rtol": rtol}

    def params(self) -> dict[str, Any]:
        return {"device": self.device, "workers": len(self.slots), "timeout_s": self.timeout_s, **self.config}

    def run(self, items: Iterable[tuple[str, str]]) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ``(key, verdict)`` for each ``(key, code)`` as workers finish them (any order)."""
        ctx = mp.get_context("spawn")
        pending = list(items)
        pending.reverse()
        outbox = ctx.Queue()
        workers: list[dict[str, Any]] = []

        next_id = iter(range(1 << 30))

        def spawn(slot: str) -> dict[str, Any]:
            wid = next(next_id)
            inbox = ctx.Queue()
            proc = ctx.Process(target=_worker_main, args=(wid, slot, self.threads, self.config, inbox, outbox),
                               daemon=True)
            proc.start()
            return {"id": wid, "slot": slot, "proc": proc, "inbox": inbox, "key": None, "started": None,
                    "ready": False, "spent": 0.0, "waited": 0.0, "paused": None}

        workers = [spawn(slot) for slot in self.slots[: max(1, min(len(self.slots), len(pending)))]]
        busy = failed_starts = 0
        try:
            while pending or busy:
                for w in workers:
                    if w["ready"] and w["key"] is None and pending:
                        key, code = pending.pop()
                        w["key"], w["started"], w["spent"], w["waited"], w["paused"] = key, None, 0.0, 0.0, None
                        w["inbox"].put((key, code))
                        busy += 1
                try:
                    kind, wid, key, verdict = outbox.get(timeout=0.2)
                except queue.Empty:
                    kind = wid = None
                owner = next((w for w in workers if w["id"] == wid), None)
                if owner is not None:  # messages of a killed worker are dropped
                    if kind == "ready":
                        owner["ready"] = True
                    elif kind == "start" and owner["key"] == key:
                        owner["started"], owner["spent"], owner["waited"], owner["paused"] = time.perf_counter(), 0.0, 0.0, None
                    elif kind == "waiting" and owner["key"] == key and owner["started"] is not None:
                        # the clock stops while the task waits for a machine-wide slot (bounded: MAX_WAIT_S)
                        owner["spent"] += time.perf_counter() - owner["started"]
                        owner["started"], owner["paused"] = None, time.perf_counter()
                    elif kind == "running" and owner["key"] == key and owner.get("paused") is not None:
                        owner["waited"] += time.perf_counter() - owner["paused"]
                        owner["started"], owner["paused"] = time.perf_counter(), None
                    elif kind == "done" and owner["key"] == key:
                        owner["key"] = None
                        busy -= 1
                        yield key, verdict
                for i, w in enumerate(workers):
                    if not w["ready"] and not w["proc"].is_alive():
                        failed_starts += 1
                        if failed_starts > 2 * len(workers):
                            raise SynthesisError(f"filter workers die at start (exit code {w['proc'].exitcode}); "
                                                 f"run the filter from a script with an `if __name__ == '__main__':` guard")
                        workers[i] = spawn(w["slot"])
                        continue
                    now = time.perf_counter()
                    ran = w.get("spent", 0.0) + (now - w["started"] if w["started"] is not None else 0.0)
                    waited = w.get("waited", 0.0) + (now - w["paused"] if w.get("paused") is not None else 0.0)
                    overdue = w["key"] is not None and (ran > self.timeout_s or waited > MAX_WAIT_S)
                    dead = not w["proc"].is_alive()
                    if w["key"] is not None and (overdue or dead):
                        key = w["key"]
                        _kill(w["proc"])
                        busy -= 1
                        reason = "timeout" if overdue else "worker_crash"
                        detail = (f"no verdict within {self.timeout_s:.0f} s of its own (it waited {waited:.0f} s "
                                  f"for machine-wide slots besides)" if overdue
                                  else f"worker died with exit code {w['proc'].exitcode}")
                        workers[i] = spawn(w["slot"])
                        yield key, {"ok": False, "reason": reason, "detail": detail}
        finally:
            for w in workers:
                try:
                    w["inbox"].put(None)
                except Exception:  # noqa: BLE001
                    pass
            for w in workers:
                w["proc"].join(2)
                if w["proc"].is_alive():
                    _kill(w["proc"])


    def run_on(self, executor: Any, items: Iterable[tuple[str, str]],
               workers: int | None = None) -> Iterator[tuple[str, dict[str, Any] | None]]:
        """``run`` on an executor's workers (``ray``: one per GPU, or per CPU on the cpu device): jobs
        of ``batch`` tasks, each checked there by a one-worker ExecFilter (its own process and
        timeout, as here). A job the executor lost gives ``(key, None)`` for its tasks: unchecked,
        not rejected, so a rerun checks them again."""
        from kag.plugin import Job

        items = list(items)
        params = {"device": self.device, "workers": 1, "timeout_s": self.timeout_s, **self.config}
        chunks = {f"batch-{i // self.batch}": items[i:i + self.batch] for i in range(0, len(items), self.batch)}
        jobs = [Job(key, CHECK_BATCH_FN, {"items": [list(item) for item in chunk], "params": params})
                for key, chunk in chunks.items()]
        for outcome in executor.map_unordered(jobs, workers, gpu=self.device == "cuda"):
            if outcome.error is not None or not isinstance(outcome.value, list):
                for key, _ in chunks[outcome.key]:
                    yield key, None
                continue
            for key, verdict in outcome.value:
                yield key, verdict


def check_batch(items: list[list[str]], params: dict[str, Any]) -> list[list[Any]]:
    """An executor job: ``[key, verdict]`` for each ``[key, code]``, checked on this worker."""
    return [[key, verdict] for key, verdict in ExecFilter(**params).run([(k, c) for k, c in items])]


@hookimpl
def kag_register_filters(register) -> None:
    register("exec", ExecFilter)
