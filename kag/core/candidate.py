"""The untrusted side: a fresh spawned process that imports ``model_new`` and runs ``ModelNew``.

It never sees the reference's outputs and never reports a verdict: it receives weights and
inputs from the judge, returns outputs, and times itself with timer references captured before
``model_new`` is imported. It lives in its own session (process group) so the judge can kill it
and anything it started, and it dies with the judge.

Protocol (judge -> candidate, candidate -> judge):
``("ready", info)`` after import and construction; ``("state", sd)`` -> ``("loaded", info)``;
``("inputs", tensors)`` (the shared input buffer, kept); ``("check", k)`` -> ``("outputs", k, out)``;
``("time", opts)`` -> per iteration ``("refill", i)`` <- ``("filled", i)``, then ``("timing", info)``;
``("guards", None)`` -> ``("violations", [...])``; ``("exit", None)``. Any failure -> ``("error", kind, msg)``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sys
import threading
import traceback
import types
from typing import Any

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); best effort elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # noqa: BLE001
        pass


_SPAWN_LOCK = threading.Lock()


def spawn_process(target: Any, args: tuple, name: str) -> Any:
    """Start ``target(*args)`` in a fresh interpreter (spawn) without re-importing ``__main__``.

    multiprocessing's spawn re-runs the caller's main script in the child unless it is guarded by
    ``if __name__ == "__main__"``; a worker must not depend on how its caller's script is written,
    so the main module is hidden while the child is prepared.
    """
    import torch.multiprocessing as tmp

    ctx = tmp.get_context("spawn")
    proc = ctx.Process(target=target, args=args, daemon=False, name=name)
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


def _to_device(obj: Any, device: str) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(x, device) for x in obj)
    return obj


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


def _runtime_guards(names: list[str], selection: dict[str, list[str]]) -> list[Any]:
    """Runtime hooks of the named guard plugins (issue 4): objects with optional
    ``before_import()``, ``around_forward()`` (a context manager) and ``violations()``."""
    if not names:
        return []
    from kag.core.plugins import Plugins

    plugins = Plugins.from_names(selection)
    hooks = []
    for name in names:
        guard = plugins.create("guard", name)
        make = getattr(guard, "runtime", None)
        hook = make() if callable(make) else None
        if hook is not None:
            hooks.append((name, hook))
    return hooks


def candidate_main(conn: Any, spec: dict[str, Any]) -> None:
    """Entry point of the spawned candidate process."""
    os.setsid()
    die_with_parent()
    from kag.core.channel import dumps, redirect_output

    redirect_output(spec.get("output_fifo"))
    import torch
    import torch.multiprocessing  # noqa: F401 - tensor reductions for the channel

    from kag.core.tasks import load_module
    from kag.core.timing import Clock, time_iterations

    device = spec["device"]
    clock = Clock(device)  # timers captured before any solution code exists in this process
    send_bytes, recv = conn.send_bytes, conn.recv

    def send(msg: tuple) -> None:
        send_bytes(dumps(msg))

    phase = "load"
    try:
        hooks = _runtime_guards(spec.get("runtime_guards", []), spec.get("plugin_selection", {}))
        ns = load_module(spec["task_code"], spec["task_path"])
        torch.manual_seed(spec["init_seed"])
        init_inputs = ns["get_init_inputs"]()
        for _, hook in hooks:
            if hasattr(hook, "before_import"):
                hook.before_import()
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
        send(("ready", {"pid": os.getpid()}))
        inputs: list[Any] = []
        out: Any = None
        while True:
            msg = recv()
            op, arg = msg[0], msg[1]
            out = None
            if op == "state":
                phase = "load"
                info: dict[str, Any] = {}
                if arg:
                    missing, unexpected = model.load_state_dict(arg, strict=False)
                    info = {"missing": list(missing), "unexpected": list(unexpected)}
                del arg, msg
                send(("loaded", info))
            elif op == "inputs":
                inputs = list(arg)
            elif op == "check":
                phase = f"check {arg + 1}"
                stack = contextlib.ExitStack()
                with stack:
                    for _, hook in hooks:
                        if hasattr(hook, "around_forward"):
                            stack.enter_context(hook.around_forward())
                    with torch.no_grad():
                        out = model(*inputs)
                    clock.synchronize()
                send(("outputs", arg, out))
            elif op == "time":
                phase = "timing"
                if clock.cuda:
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()

                def refill(i: int) -> None:
                    send(("refill", i))
                    reply = recv()
                    if reply[0] != "filled":
                        raise RuntimeError(f"protocol: expected 'filled', got {reply[0]!r}")

                times = time_iterations(lambda: model(*inputs), refill, clock,
                                        warmup=arg["warmup"], iters=arg["iters"])
                peak = torch.cuda.max_memory_allocated() / 2**20 if clock.cuda else _max_rss_mb()
                send(("timing", {"times": times, "peak_memory_mb": peak}))
            elif op == "guards":
                found = []
                for name, hook in hooks:
                    if hasattr(hook, "violations"):
                        found += [{"guard": name, "detail": str(v)} for v in hook.violations()]
                send(("violations", found))
            elif op == "exit":
                return
            else:
                send(("error", "exception", f"protocol: unknown request {op!r}"))
                return
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
