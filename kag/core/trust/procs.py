"""Process helpers of the trusted side: spawn a clean interpreter, die with the parent, describe a
failure, rebuild the plugin registry in a worker from plain names.

Used by the orchestrator (judges, the analysis step) and the judge; nothing here runs solution code.
"""

from __future__ import annotations

import signal
import sys
import threading
import traceback
import types
from typing import Any

PR_SET_PDEATHSIG = 1
_SPAWN_LOCK = threading.Lock()


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); best effort elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # noqa: BLE001
        pass


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


def describe_exception(exc: BaseException, limit: int = 4000) -> str:
    """The exception and the frames of solution code (not of the harness), trimmed."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "kag/core/" not in f.filename.replace("\\", "/")]
    where = "".join(traceback.format_list(frames[-8:]))
    text = f"{type(exc).__name__}: {exc}"
    if where:
        text = f"{text}\n{where}"
    return text[:limit]


def rebuild_plugins(selection: dict[str, list[str]], extra_builtins: list[str] | tuple[str, ...] = ()) -> Any:
    """The evaluator's plugin registry, rebuilt from plain names in a spawned process."""
    from kag.core.plugins import DEFAULT_PLUGINS, Plugins

    builtins = DEFAULT_PLUGINS + tuple(m for m in extra_builtins if m not in DEFAULT_PLUGINS)
    plugins = Plugins(builtins=builtins)
    plugins.select({kind: list(names) for kind, names in selection.items()})
    return plugins
