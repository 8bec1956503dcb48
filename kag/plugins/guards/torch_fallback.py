"""``no-torch-fallback``: the solution's compute must run in its own kernels, not in PyTorch.

Runtime: a TorchDispatchMode records every ATen op that runs while ``ModelNew.forward`` runs
(Python calls, ``torch.ops``, and C++ ``torch::``/``at::`` calls from the binding all pass
through the dispatcher), a TorchFunctionMode tells Python-level calls from C++ ones, and a
profile hook catches ``torch.compile``/TorchScript frames. Static: the AST of ``model_new.py``
and a scan of ``kernels/*`` (``static_checks.py``).

The allow-list (``ALLOWED_OPS``), decided and tested:
- allocation: empty, empty_like, empty_strided, new_empty*, resize_ (no data is computed);
- constant fills: zeros, ones, full (and *_like, new_*), fill_, zero_: memset-like, they read no
  input, and zeroed accumulators are an honest need of atomic/split-K kernels;
- views and metadata: view, _unsafe_view, alias, as_strided, permute, transpose, t, unsqueeze,
  squeeze, expand, select, slice, split, unbind, unfold, diagonal, detach, view_as_real/complex,
  size/stride/numel/dim queries, is_contiguous, record_stream;
- ``contiguous()`` and ``reshape()`` are allowed only when they do not copy: a no-op
  ``contiguous`` never reaches the dispatcher and a view-compatible ``reshape`` becomes ``view``;
  when they copy, the copy (``clone``/``copy_``/``_reshape_copy``) is reported.
Everything else (arithmetic, reductions, matmul, conv, copies, dtype conversions ``_to_copy``,
``.item()``) is a violation.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from kag.core.guarding import ForwardInfo, GuardBase, solution_location
from kag.core.hookspecs import hookimpl
from kag.core.records import Solution, Task, Violation

ALLOCATION_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
                            "empty_permuted", "resize_", "lift_fresh"})
FILL_OPS = frozenset({"zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros",
                      "new_ones", "new_full", "fill_", "zero_", "scalar_tensor"})
VIEW_OPS = frozenset({"view", "_unsafe_view", "alias", "as_strided", "permute", "transpose", "t",
                      "unsqueeze", "squeeze", "expand", "select", "slice", "split", "split_with_sizes",
                      "unbind", "unfold", "diagonal", "detach", "view_as_real", "view_as_complex",
                      "_reshape_alias", "narrow", "expand_as", "view_as", "chunk", "movedim"})
METADATA_OPS = frozenset({"sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride",
                          "numel", "dim", "is_contiguous", "is_same_size", "record_stream",
                          "is_complex", "is_floating_point", "is_nonzero", "storage_offset"})
ALLOWED_OPS = ALLOCATION_OPS | FILL_OPS | VIEW_OPS | METADATA_OPS

# Frames that only run when torch.compile code is (re)compiled or executed. The plain
# ``eval_frame._fn`` wrapper is NOT one: torch wraps some of its own functions in
# ``torch.compiler.disable``, which goes through it.
COMPILER_MARKERS = ("/torch/_dynamo/convert_frame.py", "/torch/_dynamo/backends/", "/torch/_inductor/output_code.py",
                    "/torch/_functorch/_aot_autograd/runtime_wrappers.py")


def is_compiler_frame(filename: str, code_name: str) -> bool:
    fname = filename.replace("\\", "/")
    if fname.endswith("/torch/_dynamo/eval_frame.py"):
        return code_name == "compile_wrapper"
    return any(m in fname for m in COMPILER_MARKERS)


def op_base_name(func: Any) -> tuple[str, str]:
    """(namespace, base name) of an OpOverload: aten::relu.default -> ("aten", "relu")."""
    schema = getattr(func, "_schema", None)
    full = schema.name if schema is not None else str(func)
    ns, _, name = full.partition("::")
    return (ns, name) if name else ("aten", ns)


def is_allowed_op(func: Any) -> bool:
    ns, name = op_base_name(func)
    return ns in ("aten", "prim") and name in ALLOWED_OPS


class _Recorder:
    """Holds what the two modes saw: {(op, where): count}."""

    def __init__(self) -> None:
        self.hits: dict[tuple[str, str], int] = {}
        self.python_depth = 0
        self.python_names: list[str] = []
        self.compiler_frames: dict[str, str] = {}

    def add(self, op: str, where: str) -> None:
        self.hits[(op, where)] = self.hits.get((op, where), 0) + 1


def _make_modes(rec: _Recorder) -> tuple[Any, Any]:
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class FunctionMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            rec.python_depth += 1
            rec.python_names.append(getattr(func, "__name__", str(func)))
            try:
                return func(*args, **(kwargs or {}))
            finally:
                rec.python_depth -= 1
                rec.python_names.pop()

    class DispatchMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            if not is_allowed_op(func):
                ns, name = op_base_name(func)
                line = solution_location("")
                if rec.python_depth > 0:
                    via = rec.python_names[0] if rec.python_names else "a torch call"
                    where = f"{line or 'Python'}: {ns}::{name} (from {via})"
                else:
                    where = f"C++ extension (called at {line or 'unknown line'}): {ns}::{name}"
                rec.add(f"{ns}::{name}", where)
            return func(*args, **(kwargs or {}))

    return FunctionMode(), DispatchMode()


def _inside_torch_import(frame: Any) -> bool:
    """True while torch lazily imports one of its modules (module-level code builds objects)."""
    while frame is not None:
        if frame.f_code.co_name == "<module>" and "/torch/" in frame.f_code.co_filename.replace("\\", "/"):
            return True
        frame = frame.f_back
    return False


class NoTorchFallback(GuardBase):
    """Static AST/regex checks plus a dispatcher recorder around one forward call."""

    name = "no-torch-fallback"
    nesting = 40

    def check_solution(self, solution: Solution, task: Task) -> list[Violation]:
        from kag.plugins.guards.fallback_static import fallback_findings

        return [self.violation(where, what) for where, what in fallback_findings(solution, self.options)]

    def check_forward(self, call: Callable[[], Any], info: ForwardInfo) -> tuple[Any, list[Violation]]:
        rec = _Recorder()
        fn_mode, dispatch_mode = _make_modes(rec)

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                code = frame.f_code
                # functions only (CO_NEWLOCALS): module and class bodies are lazy imports of torch
                if not rec.compiler_frames and code.co_flags & 0x02 and is_compiler_frame(code.co_filename,
                                                                                          code.co_name) \
                        and not _inside_torch_import(frame):
                    rec.compiler_frames[code.co_filename] = solution_location("unknown line")

        with fn_mode, dispatch_mode:
            old_profile = sys.getprofile()
            sys.setprofile(profile)  # set inside the modes: entering them touches torch._dynamo
            try:
                result = call()
            finally:
                sys.setprofile(old_profile)
        found = [self.violation(where, f"PyTorch compute op {op} ran inside ModelNew.forward"
                                + (f" ({n} calls)" if n > 1 else ""))
                 for (op, where), n in sorted(rec.hits.items())]
        for fname, where in rec.compiler_frames.items():
            found.append(self.violation(where, f"torch.compile code ran inside ModelNew.forward ({fname})"))
        return result, found


@hookimpl
def kag_register_guards(register) -> None:
    register("no-torch-fallback", NoTorchFallback)
