"""``no-torch-fallback``: the solution's compute must run in its own kernels, not in PyTorch.

Runtime (in the judge, on ``Observations``): the profiler that runs through every call of the
candidate records each ATen operator called inside ``ModelNew.forward`` (Python calls,
``torch.ops`` and C++ ``torch::``/``at::`` calls from the binding all pass through the
dispatcher's RecordFunction) and torch.compile's markers. Static: the AST of ``model_new.py`` and a
scan of ``kernels/*`` (``fallback_static.py``), for early feedback with file and line.

The allow-list (``ALLOWED_OPS``), decided and tested:
- allocation: empty, empty_like, empty_strided, new_empty*, resize_ (no data is computed);
- constant fills: zeros, ones, full (and *_like, new_*), fill_, zero_: memset-like, they read no
  input, and zeroed accumulators are an honest need of atomic/split-K kernels;
- views and metadata: view, _unsafe_view, alias, as_strided, permute, transpose, t, unsqueeze,
  squeeze, expand, select, slice, split, unbind, unfold, diagonal, detach, view_as_real/complex,
  size/stride/numel/dim queries, is_contiguous, record_stream;
- ``contiguous()``, ``reshape()``, ``.to()`` and other routing composites (``ROUTING_OPS``) are
  allowed only when they do not copy: the profiler records them around their decomposition, and
  when they copy, the copy (``clone``/``copy_``/``_to_copy``) is recorded under them and reported.
Everything else (arithmetic, reductions, matmul, conv, copies, dtype conversions ``_to_copy``,
``.item()``) is a violation.
"""

from __future__ import annotations

from typing import Any

from kag.plugin import GuardBase, RunInfo, Solution, Task, Violation, hookimpl

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
# Composite operators the profiler records around their decomposition: they compute nothing of
# their own, and when they do copy (a reshape that is not a view, a .to() that converts) the copy
# (aten::clone, aten::_to_copy) is recorded under them and reported.
ROUTING_OPS = frozenset({"reshape", "contiguous", "flatten", "unflatten", "to", "type_as", "reshape_as",
                         "moveaxis", "swapaxes", "swapdims", "tensor_split", "unsafe_chunk", "numpy_T", "mT",
                         "expand_copy", "align_tensors", "lift_fresh_copy", "detach_", "squeeze_", "unsqueeze_",
                         "view_as_real_copy", "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d"})
ALLOWED_OPS = ALLOCATION_OPS | FILL_OPS | VIEW_OPS | METADATA_OPS | ROUTING_OPS

def op_base_name(name: str) -> tuple[str, str]:
    """(namespace, base name) of an operator: aten::relu -> ("aten", "relu")."""
    ns, _, base = name.partition("::")
    return (ns, base.split(".")[0]) if base else ("aten", ns)


def is_allowed_op(name: str) -> bool:
    ns, base = op_base_name(name)
    return ns in ("aten", "prim") and base in ALLOWED_OPS


class NoTorchFallback(GuardBase):
    """Static AST/regex checks, the symbols the built module imports, and the operators every
    call ran (profiler observations)."""

    name = "no-torch-fallback"

    def check_solution(self, solution: Solution, task: Task) -> list[Violation]:
        from kag.plugins.guards.fallback_static import fallback_findings

        return [self.violation(where, what) for where, what in fallback_findings(solution, self.options)]

    def check_build(self, module_path: str, info: RunInfo) -> list[Violation]:
        """The module's imports against kag.core.trust.symbols' allow-list (provenance by symbols,
        not by the names a solution writes)."""
        from kag.plugin import demangle, refused_imports

        refused = refused_imports(module_path, info.allow_cublas and self.options.allow_cublas,
                                  info.allow_cudnn and self.options.allow_cudnn)
        names = demangle(s for s, _ in refused)
        return [self.violation("the built module", f"imports {names[s][:160]}: it {why}") for s, why in refused[:10]]

    def check_observations(self, obs: Any, info: RunInfo) -> list[Violation]:
        found = [self.violation("ModelNew.forward", f"PyTorch compute op {name} ran inside forward"
                                + (f" ({n} calls over {obs.calls} calls of forward)" if n > 1 else ""))
                 for name, n in sorted(obs.ops.items()) if not is_allowed_op(name)]
        found += [self.violation("ModelNew.forward", f"torch.compile code ran inside forward ({marker})")
                  for marker in obs.compiled]
        if obs.error:
            found.append(self.violation("ModelNew.forward", f"the calls could not be observed: {obs.error}"))
        return found


@hookimpl
def kag_register_guards(register) -> None:
    register("no-torch-fallback", NoTorchFallback)
