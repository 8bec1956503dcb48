"""The trusted judge: a spawned process that owns the reference, the seeds and the verdict.

It loads the task, builds ``Model`` under a fixed seed, times the baselines before any candidate
process exists, then spawns a fresh candidate process and drives it over a channel: weights and
inputs go out (the candidate gets its own copies, so writing into them cannot change what the
reference sees), outputs come back and are compared here. Reference outputs never leave this
process. Inputs are drawn from seeds made with ``secrets`` and created directly on the device.
"""

from __future__ import annotations

import gc
import os
import secrets
import signal
import time
from typing import Any, Callable

from kag.core.candidate import die_with_parent


class CandidateFailure(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class CandidateProcess:
    """A spawned candidate with a wall-clock timeout on every wait; killed with its session."""

    def __init__(self, spec: dict[str, Any]):
        import torch.multiprocessing as tmp

        from kag.core.candidate import candidate_main, spawn_process

        self.conn, child = tmp.get_context("spawn").Pipe(duplex=True)
        self.proc = spawn_process(candidate_main, (child, spec), "kag-candidate")
        child.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def send(self, msg: tuple) -> None:
        from kag.core.channel import dumps

        try:
            self.conn.send_bytes(dumps(msg))
        except (OSError, EOFError):
            raise self._closed("while receiving a request") from None

    def receive(self, timeout_s: float, phase: str) -> tuple:
        from kag.core.channel import MAX_MESSAGE_BYTES, RefusedObject, restricted_loads

        deadline = time.monotonic() + timeout_s
        while True:
            if self.conn.poll(min(0.2, max(0.0, deadline - time.monotonic()))):
                try:
                    data = self.conn.recv_bytes(MAX_MESSAGE_BYTES)
                except (EOFError, OSError):
                    raise self._closed(f"during {phase}") from None
                try:
                    msg = restricted_loads(data)
                except RefusedObject as exc:
                    raise CandidateFailure("exception", f"{phase}: {exc}") from None
                except Exception as exc:  # noqa: BLE001 - e.g. shared memory of a dead process
                    raise CandidateFailure("crash", f"{phase}: unreadable message from the candidate "
                                                    f"({type(exc).__name__}: {exc})") from None
                if not isinstance(msg, tuple) or not msg or not isinstance(msg[0], str):
                    raise CandidateFailure("exception", f"{phase}: malformed message from the candidate")
                if msg[0] == "error":
                    kind = msg[1] if msg[1] in ("oom", "cuda_error", "exception") else "exception"
                    raise CandidateFailure(kind, str(msg[2]))
                return msg
            if not self.proc.is_alive() and not self.conn.poll(0):
                raise self._closed(f"during {phase}")
            if time.monotonic() >= deadline:
                self.kill()
                raise CandidateFailure("timeout", f"{phase} did not finish within {timeout_s:g} s; "
                                                  f"the candidate process was killed")

    def _closed(self, when: str) -> CandidateFailure:
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        if code is None:
            self.kill()
            return CandidateFailure("crash", f"the candidate closed its channel {when} and was killed")
        if code < 0:
            hint = " (host out of memory?)" if code == -signal.SIGKILL else ""
            return CandidateFailure("crash", f"the candidate process crashed {when}: killed by "
                                             f"{_signal_name(code)}{hint}")
        return CandidateFailure("crash", f"the candidate process exited with status {code} {when} before "
                                         f"answering (os._exit or sys.exit in the solution?)")

    def kill(self) -> None:
        pid = self.proc.pid
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=10)

    def close(self, grace_s: float = 5.0) -> None:
        if self.proc.is_alive():
            try:
                self.send(("exit", None))
            except CandidateFailure:
                pass
            self.proc.join(timeout=grace_s)
        self.kill()
        self.conn.close()


def _to_device(obj: Any, device: str) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(x, device) for x in obj)
    return obj


def _fill(buffer: list[Any], fresh: list[Any]) -> bool:
    """Copy ``fresh`` into ``buffer`` in place; False when shapes or values differ structurally."""
    import torch

    if len(buffer) != len(fresh):
        return False
    for b, f in zip(buffer, fresh):
        if isinstance(b, torch.Tensor) != isinstance(f, torch.Tensor):
            return False
        if isinstance(b, torch.Tensor):
            if b.shape != f.shape or b.dtype != f.dtype:
                return False
        elif b != f:
            return False
    with torch.no_grad():
        for b, f in zip(buffer, fresh):
            if isinstance(b, torch.Tensor):
                b.copy_(f)
    return True


def _clone_tree(obj: Any) -> Any:
    import torch

    if type(obj) is torch.Tensor:
        return obj.detach().clone()
    if type(obj) in (list, tuple):
        return type(obj)(_clone_tree(x) for x in obj)
    if type(obj) is dict:
        return {k: _clone_tree(v) for k, v in obj.items()}
    return obj


class Judge:
    def __init__(self, spec: dict[str, Any], notify: Callable[[tuple], None]):
        import torch

        from kag.core.plugins import Plugins
        from kag.core.tasks import load_module
        from kag.core.timing import Clock

        self.spec = spec
        self.notify = notify
        self.device = spec["device"]
        self.cuda = self.device.startswith("cuda")
        self.plugins = Plugins.from_names(spec.get("plugin_selection", {}))
        self.report: dict[str, Any] = {"timing": {}, "times_ms": {}, "durations_s": {}, "baseline_cache": {},
                                       "violations": [], "notes": []}
        self.clock = Clock(self.device)
        self.ns = load_module(spec["task_code"], spec["task_path"])
        torch.manual_seed(spec["init_seed"])
        init_inputs = self.ns["get_init_inputs"]()
        torch.manual_seed(spec["init_seed"])
        with torch.device(self.device):
            self.model = self.ns["Model"](*init_inputs).to(self.device)
        self.secret = spec.get("seed")
        if self.secret is None:
            self.secret = secrets.randbits(62)
        self.buffer = self.make_inputs(self.secret)
        self.candidate: CandidateProcess | None = None

    # -- inputs ---------------------------------------------------------------------------------
    def make_inputs(self, seed: int) -> list[Any]:
        import torch

        torch.manual_seed(seed)
        with torch.device(self.device):
            return list(_to_device(self.ns["get_inputs"](), self.device))

    def refill(self, i: int) -> None:
        fresh = self.make_inputs(self.secret + 1000 + i)
        if not _fill(self.buffer, fresh):
            raise RuntimeError("get_inputs() returned inputs of another shape or structure on a later call; "
                               "timing needs fixed input shapes")
        del fresh
        self.clock.synchronize()

    def free(self) -> None:
        gc.collect()
        if self.cuda:
            import torch

            torch.cuda.empty_cache()

    # -- baselines ------------------------------------------------------------------------------
    def time_baselines(self) -> None:
        import torch

        from kag.core.baseline_cache import BaselineCache, cache_key
        from kag.core.timing import summarize, time_iterations

        spec = self.spec
        info = self.report["device"]
        device_key = info["name"] + ("" if self.cuda else f"/{info.get('threads')}t")
        cache = BaselineCache(spec.get("cache_dir"))
        for name, mode in spec["baselines"]:
            start = time.perf_counter()
            key = cache_key(spec["task_hash"], device_key, torch.__version__, name, mode, spec["num_timed"])
            stats = cache.get(key) if spec.get("use_baseline_cache", True) else None
            if stats is not None:
                self.report["baseline_cache"][name] = "hit"
            else:
                baseline = self.plugins.create("baseline", name, mode=mode)
                fn = baseline.prepare(self.model)
                with torch.no_grad():
                    times = time_iterations(lambda: fn(*self.buffer), self.refill, self.clock,
                                            warmup=spec["warmup"], iters=spec["num_timed"])
                stats = summarize(times)
                cache.put(key, stats)
                self.report["baseline_cache"][name] = "miss"
                del fn, baseline
                if hasattr(torch, "_dynamo"):
                    torch._dynamo.reset()
                self.free()
            self.report["timing"][name] = stats
            self.report["times_ms"][name] = stats.median_ms
            self.report["durations_s"][f"baseline_{name}"] = round(time.perf_counter() - start, 3)

    # -- the candidate --------------------------------------------------------------------------
    def start_candidate(self, output_fifo: str) -> CandidateProcess:
        spec = self.spec
        cspec = {k: spec[k] for k in ("task_code", "task_path", "device", "init_seed", "model_new_path",
                                      "module_dir", "runtime_guards", "plugin_selection")}
        cspec["output_fifo"] = output_fifo
        start = time.perf_counter()
        cand = self.candidate = CandidateProcess(cspec)
        self.notify(("candidate", cand.pid))
        load_s = spec["timeouts"]["load_s"]
        cand.receive(load_s, "importing model_new.py and building ModelNew")
        state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        cand.send(("state", state))
        loaded = cand.receive(load_s, "loading the reference weights into ModelNew")
        del state
        if loaded[1].get("unexpected") or loaded[1].get("missing"):
            self.report["notes"].append(f"state_dict keys not matched: {loaded[1]}")
        cand.send(("inputs", self.buffer))
        self.report["durations_s"]["load"] = round(time.perf_counter() - start, 3)
        return cand

    def check(self, cand: CandidateProcess) -> bool:
        import torch

        from kag.core.compare import compare_outputs

        tolerance = self.plugins.create("tolerance", self.spec["tolerance"])
        n = self.spec["num_checks"]
        start = time.perf_counter()
        try:
            for k in range(n):
                inputs = self.make_inputs(secrets.randbits(62) if self.spec.get("seed") is None
                                          else self.secret + 7 + k)
                if not _fill(self.buffer, inputs):
                    self.buffer = _clone_tree(inputs)
                    cand.send(("inputs", self.buffer))
                with torch.no_grad():
                    ref = self.model(*inputs)
                del inputs
                self.clock.synchronize()
                cand.send(("check", k))
                reply = cand.receive(self.spec["timeouts"]["check_s"], f"check {k + 1} of {n}")
                if reply[0] != "outputs" or reply[1] != k:
                    raise CandidateFailure("exception", f"check {k + 1}: unexpected reply {reply[0]!r}")
                out = _clone_tree(reply[2])
                del reply
                mismatch = compare_outputs(ref, out, tolerance.tolerance)
                del ref, out
                if mismatch is not None:
                    self.report.update(correct=False, error_kind="mismatch",
                                       error=f"check {k + 1} of {n}: {mismatch}")
                    return False
        finally:
            self.report["durations_s"]["checks"] = round(time.perf_counter() - start, 3)
            self.free()
        self.report["correct"] = True
        return True

    def runtime_violations(self, cand: CandidateProcess) -> None:
        if not self.spec.get("runtime_guards"):
            return
        cand.send(("guards", None))
        reply = cand.receive(self.spec["timeouts"]["check_s"], "runtime guard report")
        self.report["violations"] += [v for v in reply[1] if isinstance(v, dict)]

    def time_candidate(self, cand: CandidateProcess) -> None:
        from kag.core.records import TimingStats
        from kag.core.timing import summarize

        spec = self.spec
        iters = spec["num_timed"]
        deadline = time.monotonic() + spec["timeouts"]["timing_s"]
        start = time.perf_counter()
        cand.send(("time", {"warmup": spec["warmup"], "iters": iters}))
        marks: list[float] = []
        while True:
            msg = cand.receive(max(0.0, deadline - time.monotonic()), "timing")
            if msg[0] == "refill":
                marks.append(time.perf_counter())
                self.refill(int(msg[1]))
                cand.send(("filled", msg[1]))
            elif msg[0] == "timing":
                marks.append(time.perf_counter())
                info = msg[1]
                break
            else:
                raise CandidateFailure("exception", f"timing: unexpected message {msg[0]!r}")
        times = [float(t) for t in info.get("times", [])]
        if len(times) != iters or not all(t > 0 and t == t for t in times):
            raise CandidateFailure("exception", f"timing: the candidate reported {len(times)} times, expected "
                                                f"{iters} positive ones")
        # Each reported time must fit in the wall-clock interval the judge saw around it.
        walls = [(b - a) * 1000.0 for a, b in zip(marks, marks[1:])]
        over = [i for i, (t, w) in enumerate(zip(times, walls)) if t > w + 1.0]
        if over:
            self.report["violations"].append({"guard": "evaluator", "detail": (
                f"timing: {len(over)} reported iteration times exceed the wall-clock time the judge "
                f"observed (first: iteration {over[0]}, {times[over[0]]:.3f} ms > {walls[over[0]]:.3f} ms)")})
        stats: TimingStats = summarize(times)
        self.report["timing"]["candidate"] = stats
        self.report["times_ms"]["candidate"] = stats.median_ms
        self.report["timing"]["candidate_wall"] = summarize(walls)
        self.report["peak_memory_mb"] = info.get("peak_memory_mb")
        self.report["durations_s"]["timing"] = round(time.perf_counter() - start, 3)


def judge_main(conn: Any, spec: dict[str, Any]) -> None:
    """Entry point of the spawned judge process; sends ("candidate", pid) then ("result", report)."""
    die_with_parent()
    os.dup2(2, 1)  # nothing the judge or torch prints may reach the caller's stdout (kag score --json)
    from kag.core.channel import OutputCapture
    from kag.core.records import to_dict
    from kag.core.timing import device_info

    report: dict[str, Any] = {}
    judge: Judge | None = None
    capture: OutputCapture | None = None
    try:
        start = time.perf_counter()
        judge = Judge(spec, conn.send)
        report = judge.report
        report["device"] = device_info(judge.device, spec["backend"])
        report["durations_s"]["reference"] = round(time.perf_counter() - start, 3)
        if spec["do_timing"]:
            judge.time_baselines()
        if spec["do_correctness"] or spec["do_timing"]:
            capture = OutputCapture()
            cand = judge.start_candidate(capture.path)
            ok = judge.check(cand) if spec["do_correctness"] else True
            if ok:
                judge.runtime_violations(cand)
            if ok and spec["do_timing"] and not report["violations"]:
                judge.time_candidate(cand)
    except CandidateFailure as exc:
        report.update(correct=False, error_kind=exc.kind, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - the reference or the harness failed, not the candidate
        from kag.core.candidate import describe_exception

        report.update(error_kind="exception", judge_error=True,
                      error=f"the judge failed (reference model or evaluator): {describe_exception(exc)}")
    finally:
        if judge is not None and judge.candidate is not None:
            judge.candidate.close()
        if capture is not None:
            report["candidate_output"] = capture.close()
        conn.send(("result", to_dict(report)))
