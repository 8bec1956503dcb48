"""The decontam filter's third signal: what a task computes, by running it (trusted side).

Two tasks compute the same function when, built with the same constructor arguments and the same
parameters, they give the same outputs on the same random inputs, whatever the spelling: ``nn.Linear``
or its weights and ``x @ w.t() + b``, ``F.silu`` or ``x * sigmoid(x)``, a softmax written out, a
positive scale moved through a LeakyReLU, other sizes. The op graph (kag.core.data.opgraph) compares
how a task is written: traced under the aten decompositions it now sees these (silu, softmax, the moved
scale), but not a sigmoid, a SELU or a mean written out in other primitives, which this signal does.

For a candidate task, every benchmark task's ``Model`` is built with the *candidate's*
``get_init_inputs()`` (so a copy with changed sizes still fits) and run on the candidate's inputs;
every floating parameter of both models is set from its shape alone (a seeded draw per shape, so two
spellings of one layer get the same values whatever their names), both run in eval mode under the
same seed. Equal outputs (same shape, close, not constant) mean the same function. A benchmark task
that does not accept those arguments or inputs raises at once and is skipped. The checks run in a
forked child under a deadline, so a benchmark model that would allocate or loop for long costs the
deadline, not the run; a candidate whose check does not finish in time gets no numeric verdict.

The same runs can also say that two tasks compute *different* functions (``compare``): the op
multiset (decontam) matches the same ops wired otherwise, which may be an algebraic rewrite (a scale
moved through a LeakyReLU) or another function (a bias added after the ReLU, not before). Built
alike and run on the same inputs, outputs of another shape or value settle it. When the benchmark
task does not take the candidate's arguments, the candidate is built with the benchmark task's
instead, matched by parameter name, at the benchmark task's sizes scaled down (``scaled``). Only
models whose parameters have the same shapes are compared (``by_shape`` gives equal shapes equal
values, so a layer stored transposed would differ for that alone); else there is no verdict.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import signal
import time
import zlib
from typing import Any, Callable

PAIR_LIMIT_S = 5.0  # one benchmark model on the candidate's inputs
TASK_LIMIT_S = 120.0  # all of them for one candidate
RTOL, ATOL = 1e-3, 1e-4
SCALED_MAX = 128  # the largest module-level size of a benchmark task run at its own (scaled) sizes


def load(code: str) -> dict[str, Any]:
    """The task module's namespace (``Model``, ``get_inputs``, ``get_init_inputs``)."""
    from kag.plugin import load_module

    return load_module(code, "<task>")


def by_shape(model: Any) -> None:
    """Every floating parameter set from its shape alone (names and order do not matter)."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                g = torch.Generator().manual_seed(zlib.crc32(repr(tuple(p.shape)).encode()))
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32).to(p.dtype) * 0.2)


def built(ns: dict[str, Any], init: list[Any], named: dict[str, Any] | None = None) -> Any:
    """The task's ``Model`` with its parameters set ``by_shape``, in eval mode."""
    import torch

    torch.manual_seed(0)  # tensors a constructor draws that are not parameters (an RNN's h0): alike too
    model = ns["Model"](*init, **(named or {}))
    if isinstance(model, torch.nn.Module):
        by_shape(model)
        model.eval()
    return model


def run(model: Any, inputs: list[Any]) -> Any:
    import torch

    torch.manual_seed(1234)
    with torch.no_grad():
        return model(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])


def outputs(ns: dict[str, Any], init: list[Any], inputs: list[Any]) -> Any:
    return run(built(ns, init), inputs)


def same(a: Any, b: Any) -> bool:
    """Equal tensors (or tuples/lists of them) that are not constant: a function of their inputs."""
    import torch

    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and len(a) > 0 and all(same(x, y) for x, y in zip(a, b))
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape or a.numel() < 2:
        return False
    if not (a.is_floating_point() and b.is_floating_point()):
        return bool(torch.equal(a, b)) and a.unique().numel() > 1
    a, b = a.double(), b.double()
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()) or float(a.std()) == 0.0:
        return False
    return bool(torch.allclose(a, b, rtol=RTOL, atol=ATOL * max(1.0, float(a.abs().max()))))


def fits(ns: dict[str, Any], init: list[Any], inputs: list[Any]) -> bool:
    """Whether the task's ``Model`` takes these constructor arguments and forward inputs at all (read
    from its signatures: most benchmark tasks are ruled out here, none of them run)."""
    import inspect

    model = ns.get("Model")
    try:
        inspect.signature(model.__init__).bind(None, *init)
        inspect.signature(model.forward).bind(None, *inputs)
    except (TypeError, ValueError, AttributeError):
        return False
    return True


class _PairTimeout(Exception):
    pass


def matches(candidate: str, references: list[tuple[str, dict[str, Any]]],
            pair_limit_s: float = PAIR_LIMIT_S) -> list[str]:
    """The references computing what ``candidate`` computes (in this process: see ``check``)."""
    import torch

    torch.set_num_threads(1)  # a forked child: the parent's thread pool did not come with it
    ns = load(candidate)
    torch.manual_seed(0)
    init, inputs = list(ns["get_init_inputs"]()), list(ns["get_inputs"]())
    mine = outputs(ns, init, inputs)
    found = []

    def alarm(*_: Any) -> None:
        raise _PairTimeout

    old = signal.signal(signal.SIGALRM, alarm)
    try:
        for name, ref in references:
            if not fits(ref, init, inputs):
                continue
            signal.setitimer(signal.ITIMER_REAL, pair_limit_s)
            try:
                if same(mine, outputs(ref, init, inputs)):
                    found.append(name)
            except (_PairTimeout, Exception):  # noqa: BLE001 - does not fit these arguments: not this function
                pass
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)
    return found


def check(candidate: str, references: list[tuple[str, dict[str, Any]]], limit_s: float = TASK_LIMIT_S,
          run: Callable[..., list[str]] = matches) -> tuple[list[str] | None, str]:
    """``matches`` in a forked child under ``limit_s``: (names, "") or (None, why there is no verdict)."""
    return in_child(lambda: run(candidate, references), limit_s)


def in_child(fn: Callable[[], Any], limit_s: float) -> tuple[Any, str]:
    """``fn()`` (JSON-able) in a forked child under ``limit_s``: (result, "") or (None, why none)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        import warnings

        warnings.simplefilter("ignore")  # the benchmark models' own warnings on arguments not theirs
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            payload = {"found": fn()}
        except BaseException as exc:  # noqa: BLE001 - the candidate itself does not run
            payload = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        os.write(w, json.dumps(payload).encode())
        os._exit(0)
    os.close(w)
    deadline, chunks = time.monotonic() + limit_s, []
    import select

    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return None, f"no numeric verdict in {limit_s:g} s"
            chunk = os.read(r, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    try:
        payload = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        return None, "the numeric check's child ended without a verdict"
    if "found" in payload:
        return payload["found"], ""
    return None, payload.get("error", "the numeric check's child ended without a verdict")


def scaled(code: str, largest: int = SCALED_MAX) -> str:
    """The task with its module-level integer sizes of 64 or more (alone or in a tuple) divided by one
    power of two, so that the largest is at most ``largest`` and sizes that divide each other still do."""
    tree = ast.parse(code)
    sizes = [c for node in tree.body if isinstance(node, ast.Assign)
             for c in (node.value.elts if isinstance(node.value, ast.Tuple) else [node.value])
             if isinstance(c, ast.Constant) and type(c.value) is int and c.value >= 64]
    k = 1
    while sizes and max(c.value for c in sizes) // k > largest:
        k *= 2
    for c in sizes:
        c.value = max(1, c.value // k)
    return ast.unparse(tree)


def by_name(model: Any, other: Any, init: list[Any]) -> dict[str, Any] | None:
    """Arguments for ``model``'s constructor taken by name from ``other``'s, bound to ``init``; None
    when one it needs is not there."""
    try:
        given = inspect.signature(other.__init__).bind(None, *init)
        given.apply_defaults()
        params = list(inspect.signature(model.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    named = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in given.arguments:
            named[p.name] = given.arguments[p.name]
        elif p.default is p.empty:
            return None
    return named


def _shapes(model: Any) -> list[tuple[int, ...]]:
    params = model.parameters() if hasattr(model, "parameters") else ()
    return sorted(tuple(p.shape) for p in params if p.is_floating_point())


def _finite(a: Any) -> bool:
    import torch

    if isinstance(a, (tuple, list)):
        return len(a) > 0 and all(_finite(x) for x in a)
    return isinstance(a, torch.Tensor) and a.numel() > 0 and bool(torch.isfinite(a.double()).all())


def compared(candidate: str, ref: dict[str, Any], ref_code: str) -> str | None:
    """"same", "different" or None (not comparable): ``candidate`` and a benchmark task built alike
    (the benchmark task with the candidate's arguments; else the candidate with the benchmark task's,
    by name, at its scaled sizes) and run on the same inputs (in this process: see ``compare``)."""
    import torch

    torch.set_num_threads(1)
    ns = load(candidate)
    torch.manual_seed(0)
    init, inputs = list(ns["get_init_inputs"]()), list(ns["get_inputs"]())
    pairs = []
    if fits(ref, init, inputs):
        pairs.append(lambda: (built(ns, init), built(ref, init), inputs))
    small = load(scaled(ref_code))
    torch.manual_seed(0)
    ref_init, ref_inputs = list(small["get_init_inputs"]()), list(small["get_inputs"]())
    if (named := by_name(ns["Model"], small["Model"], ref_init)) is not None:
        pairs.append(lambda: (built(ns, [], named), built(small, ref_init), ref_inputs))
    for pair in pairs:
        try:
            mine, theirs, xs = pair()
            if _shapes(mine) != _shapes(theirs):
                continue
            a, b = run(mine, xs), run(theirs, xs)
        except Exception:  # noqa: BLE001 - not built or not run alike: the next way, or no verdict
            continue
        if same(a, b):
            return "same"
        if _finite(a) and _finite(b):
            return "different"
    return None


def compare(candidate: str, ref: dict[str, Any], ref_code: str,
            limit_s: float = 4 * PAIR_LIMIT_S) -> tuple[str | None, str]:
    """``compared`` in a forked child under ``limit_s``: (verdict, "") or (None, why there is none)."""
    return in_child(lambda: compared(candidate, ref, ref_code), limit_s)
