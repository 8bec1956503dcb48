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
"""

from __future__ import annotations

import json
import os
import signal
import time
import zlib
from typing import Any, Callable

PAIR_LIMIT_S = 5.0  # one benchmark model on the candidate's inputs
TASK_LIMIT_S = 120.0  # all of them for one candidate
RTOL, ATOL = 1e-3, 1e-4


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


def outputs(ns: dict[str, Any], init: list[Any], inputs: list[Any]) -> Any:
    import torch

    model = ns["Model"](*init)
    if isinstance(model, torch.nn.Module):
        by_shape(model)
        model.eval()
    torch.manual_seed(1234)
    with torch.no_grad():
        return model(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])


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
            payload = {"found": run(candidate, references)}
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
        return list(payload["found"]), ""
    return None, payload.get("error", "the numeric check's child ended without a verdict")
