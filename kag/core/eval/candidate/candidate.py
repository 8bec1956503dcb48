"""The untrusted side: the harness of the candidate process, around one ``ModelNew``.

The judge forks this process, confines it (kag.core.trust.confine: no capabilities, Landlock, seccomp,
its own PID and network namespaces where the machine allows) and drives it. Nothing it says is
believed: it never sees reference outputs or the seed, it never times itself for the verdict (the
judge's clock does, kag.core.eval.judge.judge_timing), and the judge stops it (SIGSTOP) whenever it is not
inside a window the judge measures. What it reports (outputs, observations) is checked or used
only as a policy signal. On a GPU, before any solution code exists here, PyTorch's own CUDA kernels
are made unloadable (kag.core.trust.fatbin_wall): a fallback to them fails, whoever calls them.

The same harness, unconfined, runs the baselines in a second child of the judge (the baseline
runner: trusted code only, the task's ``Model`` eager or compiled), so that eager, torch.compile and
the candidate are timed through one path: the same process kind, doorbell, windows and staging.

Protocol. The judge rings a doorbell (an 8-byte word on the ``go`` pipe: op in the low byte, an
argument in the next 24 bits, a serial above); the candidate answers on the ``done`` pipe (the same
word, then where its outputs are) or, for messages, on the control channel:
- ``OP_CALL j``: one call of forward on staged input set ``j`` (filled by the judge with fresh
  inputs before the window), its output kept until the next window; answered as soon as forward
  returns (the device is not synchronised: the calls of a window run back to back). A window is
  a run of ``OP_CALL``s ended by ``OP_END``: the candidate learns how many calls a window has only
  when it ends. A correctness check, a warm-up call and a timed call are all calls of some window:
  nothing tells them apart.
- ``OP_END``: synchronise the device and ring done with where the window's outputs are. The judge
  rings a short window's end only after it stopped the child at the last call's answer and took the
  window's time (kag.core.eval.judge.candidate_process ``window``): the end is where a window's size shows.
On a GPU machine the calls after a window's first, and its end, are rung through a word of memory
shared with the judge (the ``bell``), which both sides poll: a pipe's round trip (10-20 us) made a
20 us kernel's call CPU-bound. The end's answer, with its tail, goes through the pipe.
- ``OP_NULL``: in place of a window's first call, the path of a call with nothing of forward in it
  but, on a GPU, one fill kernel of the harness's (the GPU's switch from the judge's context to this
  one is the path's, not the solution's); answered as a call is, then ended by ``OP_END`` as a
  window is, so a null window differs from a window of one call by forward alone.
- ``OP_MSG``: a pickled request follows on the control channel: ``prepare`` (device, profiler, the
  fatbin wall, seccomp), ``baseline`` (runner only: the task's Model, eager or compiled, as what a
  call runs), ``spec`` (import model_new, build ModelNew), ``state`` (reference weights, as bytes),
  ``buffers`` (allocate input sets and share them with the judge, which fills them), ``observe``
  (start the profiler), ``poison`` (fill memory the size of the outputs with a pattern), ``drop``,
  ``finish`` (stop the profiler, report), ``exit``.
Outputs are never handed over: the judge reads them from this process's memory (kag.core.eval.candidate.gpu_outputs).
Any failure -> ``("error", kind, message)``.
"""

from __future__ import annotations

import importlib.util
import io
import os
import sys
import time
from typing import Any

from kag.core.eval.boundary import COUNT, EXTENT, MAX_CALLS, OP_CALL, OP_END, OP_MSG, OP_NULL, WORD, CandidateSpec, unpack
from kag.core.records import from_dict
from kag.core.trace import mark

PATH_SAMPLES = 50_000  # calls whose path (kag.core.eval.candidate.candidate ``path_report``) is kept, at most
SPIN_S = 0.002  # how long to poll the doorbell before sleeping on it (machines with a bell: GPU hosts)


def extents(outs: list[Any]) -> bytes:
    """Where each CPU output tensor's bytes are (contiguous), for the window's outputs in order, so
    the judge reads them from this stopped process instead of asking it for them later."""
    from kag.core.eval.candidate.checks import iter_tensors

    found = []
    for out in outs:
        for t in iter_tensors(out):
            ok = t.device.type == "cpu" and t.is_contiguous()
            found.append(EXTENT.pack(t.data_ptr() if ok else 0, t.numel() * t.element_size() if ok else 0))
    return COUNT.pack(len(found)) + b"".join(found)


def tail(data: bytes = b"") -> bytes:
    """A done word's tail: its length, then the bytes (nothing, or where a window's outputs are)."""
    return COUNT.pack(len(data)) + data


PLAIN_LEAVES = (type(None), bool, int, float, str)


def plain_output(out: Any, on_cpu: bool) -> Any:
    """A call's output as the judge takes it: tensors (exactly ``torch.Tensor``), in lists, tuples
    and dicts, nothing else; on the CPU each one contiguous, so the judge can read it from this
    stopped process where ``extents`` says it is. Any other object could run code when the output
    is handed over (its ``__reduce_ex__``: work put off past the call's timer): a TypeError. The
    judge does not rely on this check (the solution can patch this process): on the CPU it fails a
    re-checked timed call whose output it cannot read from memory."""
    import torch

    if type(out) is torch.Tensor or type(out) is torch.nn.Parameter:
        return out.contiguous() if on_cpu and out.device.type == "cpu" and not out.is_contiguous() else out
    if isinstance(out, (list, tuple)):  # subclasses (torch.return_types, namedtuples) become plain ones
        items = [plain_output(x, on_cpu) for x in out]
        if type(out) in (list, tuple) and all(a is b for a, b in zip(items, out)):
            return out
        return items if isinstance(out, list) else tuple(items)
    if isinstance(out, dict):
        plain = {k: plain_output(v, on_cpu) for k, v in out.items()}
        return out if type(out) is dict and all(plain[k] is v for k, v in out.items()) else plain
    if type(out) in PLAIN_LEAVES:
        return out
    raise TypeError(f"ModelNew.forward returned a {type(out).__name__} in its output: outputs are tensors "
                    f"(torch.Tensor, not a subclass or another object), or lists, tuples and dicts of them")


def _task_and_init_inputs(spec: CandidateSpec) -> tuple[dict[str, Any], list[Any]]:
    """The task module's namespace and its ``get_init_inputs()``, seeded as the judge seeds them."""
    import torch

    from kag.core.tasks import load_module

    ns = load_module(spec.task_code, spec.task_path)
    torch.manual_seed(spec.init_seed)
    return ns, ns["get_init_inputs"]()


def classify_exception(exc: BaseException) -> str:
    """error_kind for an exception raised by solution code."""
    import torch

    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or "out of memory" in text.lower():
        return "oom"
    if "CUDA error" in text or "cudaError" in text or type(exc).__name__ == "AcceleratorError" \
            or "illegal memory access" in text:
        return "cuda_error"
    return "exception"


def _import_model_new(path: str, module_dir: str | None) -> Any:
    if module_dir:
        sys.path.insert(0, module_dir)
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location("model_new", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["model_new"] = module
    spec.loader.exec_module(module)
    return module


def _read_exact(fd: int, n: int, spin_s: float = 0.0) -> bytes:
    """``n`` bytes from ``fd``: polled for ``spin_s`` (the judge rings right after resuming us), then
    blocking. Where the judge sleeps rather than spins (a CPU host) the candidate does not spin either:
    on a 2-core machine its 2 ms poll after each answer held the core the judge woke on, and a window
    read 2 ms long in 1 of 30 to over half of the null windows from one run to the next; their median
    once made a Python loop read 0.06 ms against its 0.55 ms (reward 2 where eager took 0.15 ms)."""
    data = b""
    deadline = time.perf_counter() + spin_s
    os.set_blocking(fd, False)
    while len(data) < n:
        try:
            chunk = os.read(fd, n - len(data))
        except BlockingIOError:
            if time.perf_counter() > deadline:
                os.set_blocking(fd, True)
            continue
        if not chunk:
            raise EOFError("the judge closed the doorbell")
        data += chunk
    return data


def allocate(descr: Any, fill: bool = True) -> Any:
    """Tensors shaped as ``descr`` (the judge's input description)."""
    import torch

    if "shape" in descr:
        dtype = getattr(torch, descr["dtype"])
        t = torch.empty_strided(descr["shape"], descr.get("stride") or _contiguous(descr["shape"]), dtype=dtype,
                                device=descr["device"])
        if fill and t.numel():
            t.zero_()
        return t
    if "seq" in descr:
        items = [allocate(d, fill) for d in descr["items"]]
        return tuple(items) if descr["seq"] == "tuple" else items
    if "dict" in descr:
        return {k: allocate(v, fill) for k, v in descr["dict"].items()}
    return descr["value"]


def _contiguous(shape: list[int]) -> list[int]:
    stride, acc = [], 1
    for dim in reversed(shape):
        stride.append(acc)
        acc *= max(dim, 1)
    return list(reversed(stride))


class Harness:
    """The candidate's side of the protocol. Timer, sync and doorbell references are taken before
    model_new is imported; nothing here is trusted by the judge."""

    def __init__(self, ctrl: Any, go_fd: int, done_fd: int, layers: list[str] | None = None, bell: Any = None,
                 plan: Any = None) -> None:
        from kag.core.eval.candidate.channel import dumps

        self.bell = bell  # the shared doorbell words (go at 0, done at 8), or None
        self.layers = list(layers or [])  # confinement applied at fork (reported in prepare)
        self.plan = plan  # kag.core.trust.isolation.CandidatePlan: the task's policy narrows it in prepare
        self.clock = time.perf_counter
        import torch

        self.set_grad = torch._C._set_grad_enabled
        self.tensor_type = torch.Tensor
        from kag.core.eval.candidate.checks import iter_tensors

        self.iter_tensors = iter_tensors
        self.ctrl, self.go_fd, self.done_fd = ctrl, go_fd, done_fd
        self.dumps = dumps
        self.device = "cpu"
        self.synchronize = lambda: None
        self.forward: Any = None
        self.sets: list[list[Any]] = []  # staged input sets: call j of a window runs on set j
        self.outputs: list[Any] = []  # the last window's outputs, kept until the next window
        self.observer: Any = None
        self.observations: Any = None  # the counts of the sessions that ended
        self.snapshot: dict[str, Any] = {}
        self.own_times: list[float] = []  # ms per call of each window, on this process's clock
        self.model: Any = None
        self.null_work: Any = None  # on a GPU: the one-element tensor a null window fills
        self.window_start = 0.0
        self.fast = False  # calls after a window's first rung through the bell (prepare: the judge says)
        self.window_mark: Any = None  # the observer's range around the open window's calls
        from kag.core.eval.candidate.gpu_outputs import OutputDescriber

        self.describer = OutputDescriber()  # GPU: where a window's outputs are, for the judge to read
        self.baseline_calls = False  # the runner: calls run the task's Model, not ModelNew
        # where each call's time goes on this process's clock, since the observer started: inside
        # forward, the rest of the call, and from the last call's return to this one's ring (the
        # handshake). A report for the calibration (path_report), never a measurement the judge relies on.
        self.path: list[tuple[float, float, float]] = []  # (forward, the rest, between; -1: a window's first)
        self.left = 0.0  # when the last call returned

    # -- channel --------------------------------------------------------------------------------
    def send(self, msg: tuple) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.ctrl.send_bytes(self.dumps(msg))

    def ring_done(self, word: bytes) -> None:
        os.write(self.done_fd, word)

    # -- the loop -------------------------------------------------------------------------------
    def serve(self) -> None:
        phase = "start"
        try:
            while True:
                word = _read_exact(self.go_fd, WORD.size, SPIN_S if self.fast else 0.0)
                op, arg = unpack(word)
                if op in (OP_CALL, OP_NULL):
                    if op == OP_CALL:
                        phase = f"call {arg} of a window"
                        self.call(word, arg)
                    else:
                        phase = "a null window"
                        self.null_call(word)
                    if self.bell is not None and self.fast:
                        phase = "a window"
                        self.rest_of_window(word)
                elif op == OP_END:
                    phase = "the end of a window"
                    self.end(word)
                elif op == OP_MSG:
                    msg = self.ctrl.recv()
                    phase = str(msg[0])
                    if self.handle(msg[0], msg[1]) is False:
                        return
                else:
                    self.send(("error", "exception", f"protocol: unknown doorbell op {op}"))
                    return
        except BaseException as exc:  # noqa: BLE001 - everything the solution raises is reported
            from kag.core.trust.procs import describe_exception

            try:
                self.send(("error", classify_exception(exc), f"{phase}: {describe_exception(exc)}"))
            except Exception:  # noqa: BLE001 - the channel is gone; the judge sees the exit
                pass

    def rest_of_window(self, first: bytes) -> None:
        """After a window's first call: the next calls and the end, rung through the shared bell."""
        last = WORD.unpack(first)[0] >> 32  # the serial of the window's first call
        while True:
            word = WORD.unpack_from(self.bell, 0)[0]
            if word >> 32 <= last:
                continue  # not rung yet (the judge rings within microseconds; it stops us if it does not)
            last = word >> 32
            op, arg = word & 0xFF, (word >> 8) & MAX_CALLS
            if op == OP_CALL:
                self.call(WORD.pack(word), arg)
            elif op == OP_END:
                self.end(WORD.pack(word))
                return
            else:
                raise RuntimeError(f"protocol: unknown bell op {op}")

    def answer(self, word: bytes) -> None:
        """A call's answer, once it returned: through the bell on a GPU machine, else the pipe. Not as
        it is taken (that saves the round trip, 1-6 us a call, but tells a call it is its window's
        last while it runs: a solution could then pad the last call of a short window, unseen)."""
        if self.bell is not None and self.fast:
            WORD.pack_into(self.bell, 8, WORD.unpack(word)[0])
        else:
            self.ring_done(word + tail())

    def null_call(self, word: bytes) -> None:
        """A null window's call: the last window's outputs dropped, the harness's fill kernel (outside
        the range: not an op of forward) and an empty range, answered as a call is."""
        self.drop_outputs()
        if self.null_work is not None:
            self.null_work.fill_(1.0)
        if self.observer is not None:
            self.observer.enter_null()
            self.observer.exit_null()
        self.answer(word)

    def drop_outputs(self) -> None:
        """The last window's outputs let go, inside the hand-over's range: whatever that runs (a finalizer
        of the solution's on them) is counted as work done handing an output over, not lost between calls."""
        if self.observer is None:
            self.outputs = []
        else:
            with self.observer.post_range():
                self.outputs = []
        self.describer.clear()

    def call(self, word: bytes, index: int) -> None:
        """One call of forward on staged input set ``index``; the first of a window drops the last
        window's outputs (their memory goes back to the allocator, as a baseline's outputs do).
        Grad mode is switched off by the C call each time (forward may switch it on; a
        ``torch.no_grad`` context costs microseconds a call in Python)."""
        entered = self.clock()
        if index >= len(self.sets):
            raise RuntimeError(f"protocol: call {index} of a window but {len(self.sets)} input sets")
        if index == 0:
            self.drop_outputs()
            self.window_start = self.clock()
            if self.observer is not None:
                self.window_mark = self.observer.window_range()
                self.window_mark.__enter__()
        self.set_grad(False)
        observer = self.observer
        if observer is not None:
            observer.enter_call()
        try:
            started = self.clock()
            out = self.forward(*self.sets[index])
            returned = self.clock()
            self.outputs.append(plain_output(out, self.device == "cpu"))
        finally:
            if observer is not None:
                observer.exit_call()
        if self.device != "cpu":  # where the output is: described as it returns, not in the end's time
            last = self.outputs[-1]
            if type(last) is self.tensor_type:
                self.describer.add_tensor(last)
            else:
                self.describer.add(self.iter_tensors(last))
        self.answer(word)
        left = self.clock()
        if len(self.path) < PATH_SAMPLES:
            self.path.append((returned - started, left - entered - (returned - started),
                              entered - self.left if index else -1.0))
        self.left = left

    def path_report(self) -> dict[str, float]:
        """Microseconds a call (medians over the calls since the observer started, sampled windows'
        stops and all): ``forward`` (inside it), ``harness`` (the rest of a call), ``between`` (from
        a call's return to the next call of its window: the handshake)."""
        from statistics import median

        if not self.path:
            return {}
        between = [b for _, _, b in self.path if b >= 0]
        return {"forward": round(median(f for f, _, _ in self.path) * 1e6, 2),
                "harness": round(median(h for _, h, _ in self.path) * 1e6, 2),
                "between": round(median(between) * 1e6, 2) if between else 0.0, "calls": len(self.path)}

    def end(self, word: bytes) -> None:
        """The end of a window: synchronise, ring done with where its outputs are (CPU: addresses;
        GPU: allocations and offsets, kag.core.eval.candidate.gpu_outputs)."""
        self.synchronize()
        if self.window_mark is not None:
            self.window_mark.__exit__(None, None, None)
            self.window_mark = None
        if self.outputs:
            self.own_times.append((self.clock() - self.window_start) * 1000.0 / len(self.outputs))
        if self.device == "cpu":
            where = extents(self.outputs)
        else:
            where = self.describer.take()  # each call described its output as it returned
        self.ring_done(word + tail(where))

    def handle(self, op: str, arg: Any) -> bool | None:
        if op == "prepare":
            self.prepare(arg)
        elif op == "baseline":  # the runner: the task's Model, eager or compiled, as what a call runs
            self.load_baseline(arg)
        elif op == "drop":  # the runner: the baseline, its observer and its inputs gone (its context stays)
            self.collect()
            self.observations = None
            self.model = self.forward = None
            self.outputs, self.sets = [], []
            self.describer.clear()
            self.own_times.clear()
            _free_device(self.device)
            self.send(("dropped", self.path_report()))
        elif op == "spec":
            self.load(from_dict(CandidateSpec, arg))
        elif op == "state":
            self.load_state(arg)
        elif op == "buffers":  # more input sets: the window's calls run on them
            fresh = [list(allocate(arg["descr"], fill=False)) for _ in range(int(arg["count"]))]
            self.sets.extend(fresh)
            self.send(("buffers", fresh))
        elif op == "observe":  # a new session (the running one's counts are kept)
            from kag.core.eval.candidate.observe import CallObserver

            self.collect()
            self.observer = CallObserver(self.device, kernels=bool((arg or {}).get("kernels", True)))
            self.observer.start()
            self.path = []
            self.send(("observing", None))
        elif op == "poison":
            self.poison(arg)
        elif op == "finish":
            self.finish()
        elif op == "exit":
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)  # nothing to tear down that the OS does not: a fast exit frees the GPU sooner
        else:
            self.send(("error", "exception", f"protocol: unknown request {op!r}"))
            return False
        return None

    # -- phases ---------------------------------------------------------------------------------
    def prepare(self, arg: dict[str, Any]) -> None:
        """Device and profiler start-up before any solution code (paid while the judge loads the
        reference); then, for a candidate on a GPU, the fatbin wall (PyTorch's own CUDA kernels made
        unloadable, the harness's fills loaded first) and NVRTC closed where the task uses no cuDNN
        (kag.core.trust.nvrtc_wall); then seccomp: from here on no process can be created or traced."""
        import torch

        os.environ.update({str(k): str(v) for k, v in (arg.get("env") or {}).items()})
        self.device = arg["device"]
        self.fast = bool(arg.get("bell"))
        self.clock = time.perf_counter
        layers = list(self.layers)
        wall = arg.get("wall")
        if wall and wall.get("unreadable") and self.plan is not None:  # while one thread: before CUDA starts any
            layers.append(self.plan.narrow(wall["unreadable"]))
        if self.device.startswith("cuda"):
            from kag.core.trust import fatbin_wall

            mark("candidate", "preparing the device")
            torch.cuda.init()
            torch.empty(1, device=self.device)
            self.synchronize = torch.cuda.synchronize
            self.null_work = torch.zeros(1, device=self.device)
            mark("candidate", "CUDA context made")
            fatbin_wall.preload(self.device)  # the kernels the harness and ModelNew's construction may use
            try:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
                    torch.ones(1, device=self.device).fill_(2.0)
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - the observer reports its own failure later
                pass
            wall = arg.get("wall")
            if wall is not None:
                walled = fatbin_wall.raise_wall(allow_cublas=bool(wall.get("allow_cublas", True)),
                                                allow_cudnn=bool(wall.get("allow_cudnn", True)),
                                                sections=wall.get("sections"))
                sealed = sum(1 for name in walled if fatbin_wall.SEALED.get(name))
                layers.append(f"fatbin wall ({len(walled)} libraries, {sealed} sealed)")
                if wall.get("close_nvrtc"):
                    from kag.core.trust import nvrtc_wall

                    closed = nvrtc_wall.close_compiler(wall.get("nvrtc_code") or {})
                    sealed = sum(1 for name in closed if fatbin_wall.SEALED.get(name))
                    layers.append(f"NVRTC closed ({len(closed)} libraries, {sealed} sealed)")
        mark("candidate", "profiler warmed up")
        try:
            import torch._dynamo  # noqa: F401 - before the identity snapshot (it patches manual_seed)
        except ImportError:
            pass
        if arg.get("seccomp"):
            from kag.core.trust.confine import apply_seccomp

            try:
                layers.append(apply_seccomp(no_exec=True, no_fork=True, own_pid=os.getpid()))
            except Exception as exc:  # noqa: BLE001 - fail closed: without the filter the walls can be undone
                # (mremap of a library's unsealed mapping reads its GPU code back: an independent review, on the CPU)
                raise RuntimeError(f"the candidate's seccomp filter could not be applied ({exc}); the solution is "
                                   "not run without it (KAG_CONFINE=0 turns confinement off, for debugging only)") from exc
        mark("candidate", "device, profiler and seccomp ready")
        self.send(("prepared", {"pid": os.getpid(), "layers": layers}))

    def load_baseline(self, arg: dict[str, Any]) -> None:
        """The runner: the task's Model, built as the judge builds it, prepared by the baseline
        plugin (torch.compile compiles at its first call, in a warm-up window)."""
        from kag.core.trust.procs import rebuild_plugins

        spec = from_dict(CandidateSpec, arg["spec"])
        ns, init_inputs = _task_and_init_inputs(spec)
        model = self._construct(ns["Model"], init_inputs, spec.init_seed)
        plugins = rebuild_plugins(arg.get("plugin_selection") or {}, arg.get("plugin_builtins") or [])
        self.model = model
        self.forward = plugins.create("baseline", arg["name"], mode=arg.get("mode")).prepare(model)
        self.baseline_calls = True
        self.send(("baseline", None))

    def load(self, spec: CandidateSpec) -> None:
        """Import model_new.py (the first solution code this process runs) and build ModelNew."""
        from kag.core.eval.candidate import observe, op_counter, profiler_events  # noqa: F401 - in the snapshot
        from kag.core.eval.candidate.checks import snapshot_identities

        _, init_inputs = _task_and_init_inputs(spec)
        self.snapshot = snapshot_identities()  # what model_new may not replace (reported, not trusted)
        module = _import_model_new(spec.model_new_path, spec.module_dir)
        cls = getattr(module, "ModelNew", None)
        if cls is None:
            self.send(("error", "exception", "model_new.py defines no ModelNew class"))
            return
        self.model = self.forward = self._construct(cls, init_inputs, spec.init_seed)
        mark("candidate", "ModelNew built")
        self.send(("ready", {"pid": os.getpid()}))

    def _construct(self, cls: Any, init_inputs: list[Any], init_seed: int) -> Any:
        """``cls(*init_inputs)`` on this process's device, seeded as the judge seeds its reference."""
        import torch

        torch.manual_seed(init_seed)
        with torch.device(self.device):
            model = cls(*init_inputs)
        return model.to(self.device) if hasattr(model, "to") else model

    def load_state(self, data: bytes | None) -> None:
        import torch

        info: dict[str, Any] = {}
        if data:
            state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            missing, unexpected = self.model.load_state_dict(state, strict=False)
            info = {"missing": list(missing), "unexpected": list(unexpected)}
            del state
        self.send(("loaded", info))

    def poison(self, like: list[tuple[list[int], int]] | None = None) -> None:
        """Fill memory the size of the last window's outputs with a pattern while they are held,
        so the next window's outputs likely get poisoned memory and an output never written shows
        it (a courtesy: the judge compares outputs on inputs they could not have seen). ``like``
        ((shape, element size) of each tensor): memory of those sizes instead, for the baseline
        runner, whose poison the judge times to size the gap it times the runner after."""
        from kag.core.eval.candidate.checks import iter_tensors, poison_shapes, tensor_shapes

        with self.observer.post_range() if self.observer else _null():
            shapes = ([(tuple(shape), size, self.device) for shape, size in like] if like is not None
                      else tensor_shapes(t for out in self.outputs[:2] for t in iter_tensors(out)))
            if shapes:
                poison_shapes(shapes)
                self.synchronize()
            self.send(("poisoned", None))

    def collect(self) -> None:
        """Stop the running session, if any, and keep its counts."""
        from kag.core.eval.candidate.observations import Observations

        if self.observer is not None:
            found = self.observer.stop()
            if self.observations is None:
                self.observations = Observations()
            self.observations.merge(found)
            self.observer = None

    def finish(self) -> None:
        from kag.core.eval.candidate.checks import compare_identities
        from kag.core.eval.candidate.observations import Observations
        from kag.core.records import to_dict

        self.collect()
        obs = self.observations or Observations(error="the observer was never started")
        try:
            obs.replaced = sorted({v.detail.split(" ", 1)[0] for v in compare_identities(self.snapshot)})[:50]
        except Exception:  # noqa: BLE001
            pass
        self.observer = None
        peak = None
        if self.device.startswith("cuda"):
            import torch

            peak = torch.cuda.max_memory_allocated() / 2**20
        self.send(("finished", {"observations": to_dict(obs), "own_times_ms": self.own_times, "peak_memory_mb": peak,
                                   "path_us": self.path_report()}))


def _free_device(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
        try:
            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def candidate_main(ctrl: Any, go_fd: int, done_fd: int, output_fifo: str | None, plan: Any, bell: Any = None) -> None:
    """Entry point of the forked candidate (or, with no plan, the baseline runner): confine (while
    still one thread), then serve."""
    from kag.core.eval.candidate.channel import redirect_output
    from kag.core.trust.procs import die_with_parent

    os.setsid()
    die_with_parent()
    os.environ.pop("KAG_TIMELINE", None)  # the run's timeline is the evaluator's: a candidate writes none
    redirect_output(output_fifo)
    import faulthandler

    faulthandler.enable(all_threads=True)  # a crash in a binding shows the agent where (the captured output)
    if plan is not None:
        plan.apply_in_child()  # kag.core.sandboxing.CandidatePlan: namespaces, caps, Landlock
    import torch.multiprocessing  # noqa: F401 - tensor reductions for the channel

    Harness(ctrl, go_fd, done_fd, plan.applied if plan is not None else None, bell, plan).serve()
    sys.stdout.flush()
    sys.stderr.flush()
