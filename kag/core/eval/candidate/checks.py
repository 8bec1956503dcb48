"""What the candidate's harness checks in its own process: its outputs' tensors, the poison it
fills freed memory with, and the identities of what the evaluator relies on (no-tampering).

Untrusted side: it runs in the candidate process (kag.core.eval.candidate.candidate), before and
after the solution's code, so a solution can patch it. What it reports is a policy signal (a
violation for the guards), never what the verdict rests on. The judge uses ``iter_tensors`` too.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Iterable

from kag.core.records import Violation


def iter_tensors(obj: Any) -> Iterable[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from iter_tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from iter_tensors(x)


# Bit patterns a written output never holds by accident (quiet NaNs with a payload).
POISON_BITS = {8: 0x7FF8DEADBEEFDEAD, 4: 0x7FC0DEAD, 2: 0x7DAD, 1: 0x5A}
_INT_OF_SIZE = {8: "int64", 4: "int32", 2: "int16", 1: "int8"}


def poison_allocator(like: Iterable[Any]) -> None:
    """Allocate tensors the size of ``like``, fill them with POISON_BITS and free them, so an output
    that is allocated again but never written (``empty_like``) shows the poison."""
    poison_shapes(tensor_shapes(like))


def tensor_shapes(tensors: Iterable[Any]) -> list[tuple[tuple[int, ...], int, Any]]:
    """(shape, element size, device) of each tensor: enough to poison memory for it later, after
    the tensors themselves are freed (so the allocator hands back the poisoned block, not theirs)."""
    return [(tuple(t.shape), t.element_size(), t.device) for t in tensors]


def poison_shapes(shapes: Iterable[tuple[tuple[int, ...], int, Any]]) -> None:
    """``poison_allocator`` for shapes from ``tensor_shapes``."""
    import torch

    for shape, size, device in shapes:
        if size not in POISON_BITS or math.prod(shape) == 0:
            continue
        buf = torch.empty(shape, dtype=getattr(torch, _INT_OF_SIZE[size]), device=device)
        buf.fill_(POISON_BITS[size])
        del buf


def count_poison(t: Any) -> int:
    """How many elements of ``t`` still hold the poison pattern."""
    import torch

    size = t.element_size()
    if size not in POISON_BITS or t.numel() == 0 or not t.is_contiguous():
        return 0
    bits = t.detach().view(getattr(torch, _INT_OF_SIZE[size]))
    return int((bits == POISON_BITS[size]).sum().item())


# ---------------------------------------------------------------------------------------------
# identities (no-tampering): snapshot before model_new is imported, compare after forward
_WATCHED = (
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.time_ns", "time.monotonic",
    "time.monotonic_ns", "time.sleep",
    "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.Event.query", "torch.cuda.synchronize",
    "torch.cuda.current_stream", "torch.cuda.Stream", "torch.cuda.Stream.synchronize",
    "torch.cuda.Stream.wait_stream", "torch.cuda.empty_cache", "torch.cuda.max_memory_allocated",
    "torch.cpu.synchronize", "torch.allclose", "torch.equal", "torch.isclose", "torch.testing.assert_close",
    "torch.manual_seed", "torch.randn", "torch.rand", "torch.empty", "torch.no_grad",
    "torch.nn.Module.__call__", "torch.nn.Module._call_impl", "torch.nn.Module.load_state_dict",
    "torch.nn.Module.state_dict", "torch.profiler.profile", "torch.Tensor", "torch.tensor",
    "builtins.print", "builtins.open", "builtins.__import__", "builtins.isinstance", "builtins.type",
    "sys.exit", "os._exit", "os.kill", "pickle.dumps", "pickle.loads",
    "multiprocessing.connection.Connection.send", "multiprocessing.connection.Connection.send_bytes",
    "multiprocessing.connection.Connection.recv", "multiprocessing.connection.Connection.recv_bytes",
    # the observer's summaries (a tripwire: what they report is the candidate's process's word anyway)
    "kag.core.eval.candidate.observe.summarize_counts", "kag.core.eval.candidate.observe.CallObserver.stop",
    "kag.core.eval.candidate.observe.CallObserver.enter_call", "kag.core.eval.candidate.observe.CallObserver.exit_call",
    "kag.core.eval.candidate.op_counter.OpCounter.stop", "kag.core.eval.candidate.op_counter.parse_report",
    "kag.core.eval.candidate.profiler_events.summarize_events",
)
_WATCHED_MODULES = ("torch", "torch.cuda", "torch.nn", "torch.nn.functional", "time", "builtins", "sys",
                    "os", "pickle", "multiprocessing", "multiprocessing.connection", "kag", "kag.core",
                    "kag.core.eval.orchestrator.guarding", "kag.core.eval.candidate.checks",
                    "kag.core.eval.candidate.candidate", "kag.core.eval.judge.timing", "kag.core.eval.candidate.channel",
                    "kag.core.eval.candidate.observe", "kag.core.eval.candidate.op_counter",
                    "kag.core.eval.candidate.profiler_events")


def _lookup(path: str) -> Any:
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        modname = ".".join(parts[:cut])
        mod = sys.modules.get(modname)
        if mod is None and cut == 1:
            mod = importlib.import_module(modname)
        if mod is None:
            continue
        obj: Any = mod
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(path)


def snapshot_identities() -> dict[str, Any]:
    """References to the timers, sync points, comparison functions, Tensor methods and modules the
    evaluator relies on. Take it BEFORE ``model_new`` is imported; keep it private.

    torch._dynamo is imported first: importing it replaces ``torch.manual_seed`` (with a
    dynamo-disabled wrapper), and the guards themselves import it lazily, after the snapshot."""
    try:
        import torch._dynamo  # noqa: F401
    except ImportError:
        pass
    snap: dict[str, Any] = {}
    for path in _WATCHED:
        try:
            snap[path] = _lookup(path)
        except (LookupError, AttributeError, ImportError):
            continue
    try:
        import torch

        for key, value in vars(torch.Tensor).items():
            snap[f"torch.Tensor.{key}"] = value
        for key, value in vars(torch._C.TensorBase).items():
            snap[f"torch._C.TensorBase.{key}"] = value
    except ImportError:
        pass
    for name in _WATCHED_MODULES:
        if name in sys.modules:
            snap[f"sys.modules[{name!r}]"] = sys.modules[name]
    return snap


def compare_identities(snapshot: dict[str, Any], guard: str = "no-tampering") -> list[Violation]:
    """One violation per watched object that is no longer the same object (or is gone)."""
    now = snapshot_identities()
    changed = sorted(k for k, v in snapshot.items() if k not in now or now[k] is not v)
    added = sorted(k for k in now if k not in snapshot and k.startswith(("torch.Tensor.", "torch._C.TensorBase.")))
    found = [Violation(guard=guard, detail=f"{k} was replaced after model_new was imported (monkey-patching)")
             for k in changed]
    found += [Violation(guard=guard, detail=f"{k} was added to torch.Tensor after model_new was imported")
              for k in added]
    return found
