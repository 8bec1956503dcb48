"""The untrusted side: a fresh spawned process that imports ``model_new`` and runs ``ModelNew``.

It never sees the reference's outputs and never reports a verdict: it receives weights and
inputs from the judge, returns outputs, and times itself with timer references captured before
``model_new`` is imported. It lives in its own session (process group) so the judge can kill it
and anything it started, and it dies with the judge.

Protocol (judge -> candidate, candidate -> judge):
``("ready", info)`` after import and construction; ``("state", sd)`` -> ``("loaded", info)``;
``("inputs", tensors)`` (the shared input buffer, kept); ``("check", k)`` -> ``("outputs", k, out)``;
``("guards", {alternate, reference_output_types, reference_outputs_differ})`` ->
``("violations", [...], "alternate" | "first", output)`` (one untimed forward inside every runtime
guard, between two checks the judge picks in secret; the last output goes back to be checked too);
``("time", opts)`` -> per iteration ``("refill", i)`` <- ``("filled", i, keep_previous)``, a last
``("refill", iters)`` <- ``("filled", iters, keep_last)``, then ``("timing", info)`` with the kept
outputs; ``("exit", None)``. Any failure -> ``("error", kind, msg)``.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import threading
import traceback
import types
from typing import Any

from kag.core.trace import mark

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); best effort elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # noqa: BLE001
        pass


_SPAWN_LOCK = threading.Lock()


def spawn_process(target: Any, args: tuple, name: str, daemon: bool = False) -> Any:
    """Start ``target(*args)`` in a fresh interpreter (spawn) without re-importing ``__main__``.

    multiprocessing's spawn re-runs the caller's main script in the child unless it is guarded by
    ``if __name__ == "__main__"``; a worker must not depend on how its caller's script is written,
    so the main module is hidden while the child is prepared.
    """
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=target, args=args, daemon=daemon, name=name)
    with _SPAWN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            proc.start()
        finally:
            if main is not None:
                sys.modules["__main__"] = main
    return proc


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


def describe_exception(exc: BaseException, limit: int = 4000) -> str:
    """The exception and the frames of solution code (not of the harness), trimmed."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "kag/core/" not in f.filename.replace("\\", "/")]
    where = "".join(traceback.format_list(frames[-8:]))
    text = f"{type(exc).__name__}: {exc}"
    if where:
        text = f"{text}\n{where}"
    return text[:limit]


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


def rebuild_plugins(selection: dict[str, list[str]], extra_builtins: list[str] | tuple[str, ...] = ()) -> Any:
    """The evaluator's plugin registry, rebuilt from plain names in a spawned process."""
    from kag.core.plugins import DEFAULT_PLUGINS, Plugins

    builtins = DEFAULT_PLUGINS + tuple(m for m in extra_builtins if m not in DEFAULT_PLUGINS)
    plugins = Plugins(builtins=builtins)
    plugins.select({kind: list(names) for kind, names in selection.items()})
    return plugins


def runtime_guards(spec: dict[str, Any]) -> list[Any]:
    """The guards with a ``check_forward``, built here from their plugin names (never pickled)."""
    names = spec.get("runtime_guards") or []
    if not names:
        return []
    plugins = rebuild_plugins(spec.get("plugin_selection", {}), spec.get("plugin_builtins", ()))
    return [plugins.create("guard", name, **spec.get("guard_options", {})) for name in names]


def extension_path(module_dir: str | None) -> str | None:
    """The built ``cuda_extension*.so`` (the provenance guard lists the functions it defines)."""
    if not module_dir:
        return None
    found = sorted(p for p in os.listdir(module_dir) if p.startswith("cuda_extension") and p.endswith((".so", ".pyd")))
    return os.path.join(module_dir, found[0]) if found else None


def clone_outputs(obj: Any) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, (list, tuple)):
        return type(obj)(clone_outputs(x) for x in obj)
    if isinstance(obj, dict):
        return {k: clone_outputs(v) for k, v in obj.items()}
    return obj


class Session:
    """The candidate's side of the protocol, around one ``ModelNew`` instance."""

    def __init__(self, spec: dict[str, Any], model: Any, clock: Any, guards: list[Any], snapshot: dict[str, Any],
                 send: Any, recv: Any):
        self.spec, self.model, self.clock, self.guards = spec, model, clock, guards
        self.snapshot, self.send, self.recv = snapshot, send, recv
        self.inputs: list[Any] = []
        self.shapes: list[Any] = []  # (shape, element size, device) of the last outputs, to poison for

    def forward(self) -> Any:
        return self.model(*self.inputs)

    def poison(self) -> None:
        """Poison the memory the next output will likely get, so an unwritten one shows it."""
        from kag.core.guarding import poison_shapes

        if self.shapes:
            poison_shapes(self.shapes)

    def remember_shapes(self, out: Any) -> None:
        from kag.core.guarding import iter_tensors, tensor_shapes

        self.shapes = tensor_shapes(iter_tensors(out))

    def check(self, k: int) -> None:
        import torch

        if not self.shapes:
            from kag.core.guarding import iter_tensors, tensor_shapes

            self.shapes = tensor_shapes(iter_tensors(self.inputs))
        self.poison()
        with torch.no_grad():
            out = self.forward()
        self.clock.synchronize()
        mark("candidate", f"check {k + 1}: forward done")
        self.remember_shapes(out)
        self.send(("outputs", k, out))

    def guard(self, arg: dict[str, Any]) -> None:
        """One untimed forward inside every runtime guard; inputs B go into the SAME tensors."""
        import torch

        from kag.core.guarding import ForwardInfo, run_runtime_guards

        alternate = list(arg.get("alternate") or [])
        last: list[Any] = []  # the alternate call's output: the judge checks it against ref(B)

        def alternate_call() -> Any:
            for dst, src in zip(self.inputs, alternate):
                if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
                    dst.copy_(src)
            out = self.forward()
            last.append(out)
            return out

        opts = self.spec.get("guard_options", {})
        info = ForwardInfo(
            device="cuda" if self.clock.cuda else "cpu", extension_path=extension_path(self.spec.get("module_dir")),
            solution_dir=os.path.dirname(self.spec["model_new_path"]),
            allow_cublas=bool(opts.get("allow_cublas", True)), allow_cudnn=bool(opts.get("allow_cudnn", True)),
            reference_output_types=arg.get("reference_output_types"),
            alternate_call=alternate_call if alternate else None,
            reference_outputs_differ=bool(arg.get("reference_outputs_differ", True)),
            identity_snapshot=self.snapshot)
        with torch.no_grad():
            out, found = run_runtime_guards(self.guards, self.forward, info)
        self.clock.synchronize()
        which = "alternate" if last else "first"
        if last:
            out = last[-1]
        self.remember_shapes(out)
        self.send(("violations", [{"guard": str(v.guard), "detail": str(v.detail)} for v in found], which, out))

    def time(self, arg: dict[str, Any]) -> None:
        """Timed iterations; the output of iteration i is kept (cloned) when the judge's answer to
        the next refill names it, so which iterations are re-checked is never known in advance."""
        import torch

        from kag.core.timing import time_iterations

        if self.clock.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        iters = int(arg["iters"])
        kept: dict[int, Any] = {}
        pending: list[Any] = []  # [(i, output)] of the last timed iteration

        def refill(i: int) -> None:
            self.send(("refill", i))
            reply = self.recv()
            if reply[0] != "filled" or reply[1] != i:
                raise RuntimeError(f"protocol: expected ('filled', {i}), got {reply[:2]!r}")
            if pending:
                if len(reply) > 2 and reply[2]:
                    kept[pending[0][0]] = clone_outputs(pending[0][1])
                pending.clear()
            if i < iters:
                self.poison()

        def on_output(i: int, out: Any) -> None:
            pending.append((i, out))

        times = time_iterations(self.forward, refill, self.clock, warmup=arg["warmup"], iters=iters,
                                on_output=on_output)
        refill(iters)  # the judge's last answer: keep the final iteration's output or not
        peak = torch.cuda.max_memory_allocated() / 2**20 if self.clock.cuda else _max_rss_mb()
        self.send(("timing", {"times": times, "peak_memory_mb": peak, "kept": kept}))


def _prepare(arg: dict[str, Any]) -> Any:
    """Environment and device before any solution code: CUDA is initialised and the profiler's
    first (slow) start is paid here, while the judge is still busy with the reference."""
    import torch

    from kag.core.timing import Clock

    os.environ.update({str(k): str(v) for k, v in (arg.get("env") or {}).items()})
    device = arg["device"]
    clock = Clock(device)  # timers captured before any solution code exists in this process
    if clock.cuda:
        torch.cuda.init()
        torch.empty(1, device=device)
        try:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]):
                torch.ones(1, device=device).add_(1)
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a guard that needs the profiler reports its own failure
            pass
    return clock


def candidate_main(conn: Any, output_fifo: str | None) -> None:
    """Entry point of the spawned candidate process: preload, prepare, then run the solution."""
    os.setsid()
    die_with_parent()
    from kag.core.channel import dumps, redirect_output

    redirect_output(output_fifo)
    import torch
    import torch.multiprocessing  # noqa: F401 - tensor reductions for the channel

    from kag.core.guarding import snapshot_identities
    from kag.core.tasks import load_module

    send_bytes, recv = conn.send_bytes, conn.recv
    try:  # seconds on a GPU machine, paid while the judge loads the reference (or while a warm
        import torch._dynamo  # noqa: F401 - judge waits); needed before the identity snapshot
    except ImportError:
        pass

    def send(msg: tuple) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        send_bytes(dumps(msg))

    phase = "start"
    try:
        msg = recv()
        if msg[0] != "prepare":
            return
        mark("candidate", "prepare")
        clock = _prepare(msg[1])
        mark("candidate", "prepared (device and profiler initialised)")
        send(("prepared", {"pid": os.getpid()}))
        msg = recv()
        if msg[0] != "spec":
            return
        spec = msg[1]
        device = spec["device"]
        phase = "load"
        mark("candidate", "spec received")
        guards = runtime_guards(spec)
        ns = load_module(spec["task_code"], spec["task_path"])
        torch.manual_seed(spec["init_seed"])
        init_inputs = ns["get_init_inputs"]()
        snapshot = snapshot_identities()  # before model_new exists: what it may not replace
        module = _import_model_new(spec["model_new_path"], spec.get("module_dir"))
        cls = getattr(module, "ModelNew", None)
        if cls is None:
            send(("error", "exception", "model_new.py defines no ModelNew class"))
            return
        torch.manual_seed(spec["init_seed"])
        with torch.device(device):
            model = cls(*init_inputs)
        if hasattr(model, "to"):
            model = model.to(device)
        session = Session(spec, model, clock, guards, snapshot, send, recv)
        mark("candidate", "ModelNew built")
        send(("ready", {"pid": os.getpid()}))
        while True:
            msg = recv()
            op, arg = msg[0], msg[1]
            if op == "state":
                phase = "load"
                info: dict[str, Any] = {}
                if arg:
                    missing, unexpected = model.load_state_dict(arg, strict=False)
                    info = {"missing": list(missing), "unexpected": list(unexpected)}
                msg = arg = None
                send(("loaded", info))
            elif op == "inputs":
                session.inputs = list(arg)
            elif op == "check":
                phase = f"check {arg + 1}"
                session.check(arg)
            elif op == "guards":
                phase = "the guarded forward call"
                session.guard(arg or {})
            elif op == "time":
                phase = "timing"
                session.time(arg)
            elif op == "exit":
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)  # nothing to tear down that the OS does not: a fast exit frees the GPU sooner
            else:
                send(("error", "exception", f"protocol: unknown request {op!r}"))
                return
            msg = arg = None  # drop references to the judge's tensors between requests
    except BaseException as exc:  # noqa: BLE001 - everything the solution raises is reported
        try:
            send(("error", classify_exception(exc), f"{phase}: {describe_exception(exc)}"))
        except Exception:  # noqa: BLE001 - the channel is gone; the judge sees the exit
            pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _max_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
