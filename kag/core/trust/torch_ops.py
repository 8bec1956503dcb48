"""Which of PyTorch's operators a solution may run: allocation, fills, views, metadata and routing.

Trusted side: the policy of the evaluator, read by the runtime guard ``no-torch-fallback``
(kag.plugins.guards.torch_fallback, on the operators every call ran) and by provenance by symbols
(kag.core.trust.symbols, on the operators a built binding imports), so the two cannot disagree.

The allow-list, decided and tested:
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
