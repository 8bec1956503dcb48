"""A task's computation as a normalised op graph, for decontamination by meaning (trusted side).

The forward runs on the meta device under a dispatch mode that records each aten op and which
earlier ops' tensors it reads (what ``make_fx`` records, without building an fx graph: a ResNet-101
took 2.9 s against make_fx's 11.6 s). Parameters and inputs are meta tensors, so a 4096x4096 GEMM
or a ResNet costs no memory and no compute, the way ``probe_output`` finds shapes. A trace stops at
``MAX_OPS`` aten ops (the LSTM/GRU tasks unroll to 46k-98k over their time steps); such a task has
no graph and only the AST signal. Only trusted data-pipeline inputs are traced here (benchmark files,
and composed tasks that the exec filter has already run in its workers); agent solutions never.

Tracing lowers module calls, functional calls and methods to the same aten ops (``nn.Linear``,
``F.linear`` and ``x @ w.t() + b`` all become ``mm`` then ``add``; ``nn.ReLU``, ``F.relu``,
``torch.relu`` and ``x.relu_()`` all become ``relu``). The graph then drops what does not change
meaning: shapes, constants, names, layout ops (view, transpose, contiguous ...), computations that
read no input (tensor factories, parameter-only arithmetic, BatchNorm's step counter: folded like
constants), and statement order (nodes are hashed by their op and the hashes of their inputs,
Merkle-style, so two orders of independent statements give the same graph).

Composite ops are traced under aten's decompositions (``decompositions``: the core ATen table, plus
softmax, log-softmax, GELU, ELU, LeakyReLU and HardTanh, which core ATen keeps whole), so a
composite op and its spelling in primitives become the same nodes: ``F.silu(x)`` is
``mul(x, sigmoid(x))`` as ``x * torch.sigmoid(x)`` is, and ``torch.softmax`` is ``exp(x - amax) /
sum`` as the written-out softmax is. ``OpGraph.ops`` still counts the ops as called (one per
``F.silu``), which is what "one benchmark operator plus an elementwise op" is measured in, and
``OpGraph.whole`` is the forward traced again without decompositions, one node per op as called:
a graded overlap of decomposed graphs weighs a composite op by its primitives (a multi-head
attention's masked softmax is a dozen nodes), so one op added to it scores closer than one op is.

Normalisation layers (LayerNorm, BatchNorm, GroupNorm, InstanceNorm, RMSNorm) decompose too, by
torch's own tables, and three rewrites make their primitives the ones a written-out norm has:
``rsqrt(v)`` is a ``sqrt`` whose product is a ``div`` (``x * rsqrt(v)`` is ``x / sqrt(v)``);
``var_mean`` is a ``var`` and a ``mean`` node; ``mean((x - mean(x)) ** 2)`` (or ``x * x``, which is
``pow``) is ``var(x)``. Ops whose result the forward's output never reads are dropped (a
BatchNorm's running statistics, a norm's saved mean, the folded square).

Decomposed, those norms are the same ops and differ only in the dimensions they reduce; so a
reduction's label says which ones, in terms that views do not change (kag.core.data.opaxes): a
LayerNorm of ``(B, C)`` is ``mean@KR`` and ``var@KR``, a GroupNorm of it ``mean@KS`` (the channels
split into groups, reduced within each), and a sum or softmax over another dimension is another node.
"""

from __future__ import annotations

import collections
import hashlib
from typing import Any, Iterator

import attrs

from kag.core.data.opaxes import REDUCTIONS, Frames, reduced_dims

# Ops that move or re-view data without computing: a node of these stands for its input.
LAYOUT_OPS = frozenset({
    "view", "unsafe_view", "reshape", "reshape_alias", "t", "transpose", "permute", "expand", "expand_as",
    "clone", "contiguous", "squeeze", "unsqueeze", "flatten", "unflatten", "detach", "alias", "lift_fresh",
    "lift_fresh_copy", "to_copy", "to", "as_strided", "view_as", "numpy_T", "mT", "type_as", "copy",
    "convert_element_type",
})
# Spellings of one op after lowering; a tuple is a fused op split into its parts (data flows in order).
ALIASES: dict[str, str | tuple[str, ...]] = {
    "addmm": ("mm", "add"), "baddbmm": ("mm", "add"), "addbmm": ("mm", "add"), "bmm": "mm", "matmul": "mm",
    "mv": "mm", "dot": "mm", "linear": ("mm", "add"), "rsub": "sub", "true_divide": "div",
    "native_batch_norm": "batch_norm", "native_batch_norm_legit": "batch_norm",
    "native_batch_norm_legit_functional": "batch_norm", "native_batch_norm_legit_no_training": "batch_norm",
    "cudnn_batch_norm": "batch_norm", "native_layer_norm": "layer_norm", "native_group_norm": "group_norm",
    "max_pool1d_with_indices": "max_pool1d", "max_pool2d_with_indices": "max_pool2d",
    "max_pool3d_with_indices": "max_pool3d", "adaptive_max_pool2d": "adaptive_max_pool2d",
    "native_dropout": "dropout", "scaled_dot_product_attention": "sdpa",
    "scaled_dot_product_flash_attention_for_cpu": "sdpa", "scaled_dot_product_efficient_attention": "sdpa",
    "scaled_dot_product_flash_attention": "sdpa",
    "max": "amax",  # x.max(dim).values, a written-out softmax's max; the softmax decomposition says amax
}
# Bumped whenever tracing changes what a graph is: the reference graphs are cached under it (decontam).
TRACER_VERSION = ("5: core aten decompositions + softmax/log_softmax/gelu/elu/leaky_relu/hardtanh"
                  " + layer/batch/group/instance/rms norms; rsqrt as 1/sqrt, variance folded, dead ops dropped;"
                  " reductions labelled with the dimensions they reduce, neighbouring ones as one block")
# Normalisation layers, which core ATen keeps whole: torch's decompositions make them the var/mean,
# sub, sqrt, div, mul, add a written-out norm is (nn.InstanceNorm2d runs as native_batch_norm)
NORM_DECOMPOSITIONS = ("native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
                       "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
                       "_batch_norm_with_update", "_batch_norm_with_update_functional", "_batch_norm_no_update",
                       "native_group_norm", "_fused_rms_norm")
# Composite ops core ATen keeps whole that KernelBench calls as one operator and a rewrite spells out.
EXTRA_DECOMPOSITIONS = ("_softmax", "_log_softmax", "gelu", "elu", "leaky_relu", "hardtanh") + NORM_DECOMPOSITIONS
# ops with two results, each its own node: a norm's decomposition says var_mean, a written-out one var and mean
SPLIT_RESULTS = {"var_mean": ("var", "mean"), "std_mean": ("std", "mean")}
# Core ATen decomposes these into elementwise products and sums; as a kernel they are a matrix
# product, and ``ALIASES`` already lowers them to ``mm``.
KEEP_WHOLE = frozenset({"mv", "dot", "baddbmm", "addmm", "addbmm", "matmul"})
# x / c and x - c by a constant (a number, a parameter) are x * (1/c) and x + (-c)
BY_A_CONSTANT = {"div": "mul", "sub": "add"}
# the operand that leaves x as it is (x * 1, x / 1, x + 0, x - 0)
IDENTITY = {"mul": 1, "div": 1, "add": 0, "sub": 0}
POINTWISE_PARTS = frozenset({"add"})  # the pointwise part of a split fused op
INPUT = "input"  # the label of the forward's tensor arguments
MAX_OPS = 4000  # KernelBench's largest graph short of the unrolled RNNs has 1.8k nodes


class OpGraphError(Exception):
    """The task cannot be traced (data-dependent control flow, an op without a meta kernel ...)."""


@attrs.frozen
class OpGraph:
    """Nodes in trace order: ``labels[i]`` computed from nodes ``inputs[i]``; ``pointwise[i]`` says
    whether node i is elementwise (aten's ``pointwise`` tag)."""

    labels: tuple[str, ...]
    inputs: tuple[tuple[int, ...], ...]
    pointwise: tuple[bool, ...]
    # the ops as called, before decompositions (``F.silu`` one, not two); None: the same as ``size``
    calls: int | None = None
    # the same forward traced without decompositions (``trace`` sets it): one node per op as called
    whole: OpGraph | None = attrs.field(default=None, eq=False, repr=False)

    def digest(self) -> str:
        """Hash of the graph that no statement order, name or shape changes (Merkle over inputs)."""
        memo: list[str] = []
        for label, ins in zip(self.labels, self.inputs):  # trace order is a topological order
            parts = ",".join(sorted(memo[j] for j in ins))
            memo.append(hashlib.sha1(f"{label}({parts})".encode()).hexdigest()[:16])
        used = {j for ins in self.inputs for j in ins}
        sinks = sorted(h for i, h in enumerate(memo) if i not in used and self.labels[i] != INPUT)
        return hashlib.sha1(";".join(sinks).encode()).hexdigest()

    def without(self, drop: int, keep: int | None) -> OpGraph:
        """The graph with node ``drop`` removed, its consumers reading node ``keep`` instead."""
        index = {i: i - (i > drop) for i in range(len(self.labels)) if i != drop}

        def remap(ins: tuple[int, ...]) -> tuple[int, ...]:
            out: list[int] = []
            for j in ins:
                k = keep if j == drop else j
                if k is not None and index[k] not in out:
                    out.append(index[k])
            return tuple(out)

        rows = [(lab, remap(ins), pw) for i, (lab, ins, pw) in
                enumerate(zip(self.labels, self.inputs, self.pointwise)) if i != drop]
        return OpGraph(tuple(r[0] for r in rows), tuple(r[1] for r in rows), tuple(r[2] for r in rows))

    @property
    def size(self) -> int:
        """Compute nodes (the inputs not counted)."""
        return sum(lab != INPUT for lab in self.labels)

    @property
    def tensor_inputs(self) -> int:
        """The forward's tensor arguments (input nodes): the same function takes as many."""
        return len(self.labels) - self.size

    @property
    def ops(self) -> int:
        """Compute ops as the task calls them, before decompositions (``size`` counts after)."""
        return self.size if self.calls is None else self.calls

    def multiset(self) -> collections.Counter[str]:
        """The compute nodes' ops, with no edges: what an order-free comparison sees."""
        return collections.Counter(lab for lab in self.labels if lab != INPUT)

    def one_op_fewer(self) -> Iterator[tuple[str, str]]:
        """``(digest, label)`` of each graph with one elementwise node removed (and bypassed)."""
        for i, (label, pw) in enumerate(zip(self.labels, self.pointwise)):
            if pw:
                for keep in self.inputs[i] or (None,):
                    yield self.without(i, keep).digest(), label

    def local_tokens(self) -> collections.Counter[str]:
        """Each node's op with the ops feeding it: the multiset the graded similarity compares."""
        return collections.Counter(f"{lab}<{','.join(sorted(self.labels[j] for j in ins))}"
                                   for lab, ins in zip(self.labels, self.inputs))


def dice(a: collections.Counter[str], b: collections.Counter[str]) -> float:
    total = sum(a.values()) + sum(b.values())
    return 2 * sum((a & b).values()) / total if total else 1.0


def _op_name(target: Any) -> str:
    name = getattr(target, "__name__", str(target)).split(".")[0]
    return name.strip("_")


def decompositions() -> dict[Any, Any]:
    """The decomposition table the tracer lowers composite ops with: core ATen's plus
    ``EXTRA_DECOMPOSITIONS``, less in-place ops (their ``copy_`` back would read as an edge from the
    old value; a BatchNorm's update of its running statistics is dropped as dead instead) and
    ``KEEP_WHOLE``."""
    global _TABLE
    if _TABLE is None:
        import torch
        from torch._decomp import core_aten_decompositions, get_decompositions

        table = dict(core_aten_decompositions())
        table.update(get_decompositions([getattr(torch.ops.aten, n) for n in EXTRA_DECOMPOSITIONS]))
        norms = {_op_name(getattr(torch.ops.aten, n)) for n in NORM_DECOMPOSITIONS}
        _TABLE = {op: fn for op, fn in table.items() if isinstance(op, torch._ops.OpOverload)
                  and (not op._schema.is_mutable or _op_name(op) in norms and not op._overloadname.endswith("out"))
                  and _op_name(op) not in KEEP_WHOLE}
    return _TABLE


def out_of_place(op: Any) -> Any:
    """``hardtanh.default`` for ``hardtanh_.default`` (None when ``op`` is not an in-place op)."""
    import torch

    name = op._schema.name.split("::")[-1]
    if not (name.endswith("_") and not name.endswith("__") and op._schema.is_mutable):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    return getattr(packet, op._overloadname, None) if packet is not None else None


_TABLE: dict[Any, Any] | None = None


class _Builder:
    """Collects normalised nodes from aten calls as they are dispatched."""

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.inputs: list[tuple[int, ...]] = []
        self.pointwise: list[bool] = []
        self.calls = 0  # compute ops as called (a decomposed op counts as the nodes it would have made)
        self.inverted: set[int] = set()  # "sqrt" nodes that are 1/sqrt (rsqrt): x * rsqrt(v) is x / sqrt(v)
        self.squares: set[int] = set()  # x ** 2 and x * x

    def truncate(self, n: int) -> None:
        """Forget the nodes from ``n`` on (a decomposition that failed halfway)."""
        del self.labels[n:], self.inputs[n:], self.pointwise[n:]
        self.inverted = {i for i in self.inverted if i < n}
        self.squares = {i for i in self.squares if i < n}

    @staticmethod
    def would_make(op: Any, per_arg: list[tuple[int, ...]]) -> int:
        """How many nodes ``call`` makes of ``op`` undecomposed."""
        if _op_name(op) in LAYOUT_OPS or not any(per_arg):
            return 0
        alias = ALIASES.get(_op_name(op), _op_name(op))
        if isinstance(alias, tuple):
            return len(alias) if any(per_arg[1:]) else 0
        return 1

    def node(self, label: str, inputs: tuple[int, ...], pointwise: bool) -> tuple[int, ...]:
        if len(self.labels) >= MAX_OPS:
            raise OpGraphError(f"more than {MAX_OPS} ops (an unrolled recurrence?)")
        self.labels.append(label)
        self.inputs.append(inputs)
        self.pointwise.append(pointwise)
        return (len(self.labels) - 1,)

    def call(self, op: Any, per_arg: list[tuple[int, ...]], args: tuple, axes: str = "") -> tuple[int, ...]:
        """The nodes an op's result stands for, given the nodes each of its arguments stands for;
        ``axes`` (``@KR``: opaxes) goes on a reduction's label."""
        import torch

        srcs = tuple(dict.fromkeys(j for a in per_arg for j in a))
        name = _op_name(op)
        if name in LAYOUT_OPS or not srcs:  # a re-view; or it reads no input: folded like a constant
            return srcs
        if name in IDENTITY and len(args) == 2 and type(args[1]) in (int, float) and args[1] == IDENTITY[name]:
            return srcs  # x * 1.0, x - 0 (a decomposition's default scale): x itself
        alias = ALIASES.get(name, name)
        if name in BY_A_CONSTANT and per_arg[0] and not any(per_arg[1:]):
            alias = BY_A_CONSTANT[name]  # x / c is x * (1/c): GELU's decomposition says x * 0.7071
        if name == "convolution" and len(args) > 6:  # Conv2d and ConvTranspose3d are different tasks
            alias = f"conv{len(args[3])}d" + ("_transpose" if args[6] else "")
        if name == "rsqrt":
            self.inverted.add(len(self.labels))
            alias = "sqrt"
        elif name == "mul" and len(per_arg) == 2 and sum(len(a) == 1 and a[0] in self.inverted for a in per_arg) == 1:
            alias = "div"
        elif name == "mean" and (var := self._variance(srcs, axes)) is not None:
            return self.node("var" + axes, var, False)
        if name in SPLIT_RESULTS:
            return tuple(self.node(part + axes, srcs, False)[0] for part in SPLIT_RESULTS[name])
        square = (name == "pow" and len(args) == 2 and args[1] == 2) or \
            (name == "mul" and len(per_arg) == 2 and per_arg[0] == per_arg[1])
        if square:
            alias = "pow"  # x * x is x ** 2
        if isinstance(alias, tuple):  # addmm(bias, a, b) -> mm(a, b) -> add(., bias)
            prev = tuple(dict.fromkeys(j for a in per_arg[1:] for j in a))
            if not prev:
                return srcs
            for k, part in enumerate(alias):
                prev = self.node(part, prev + (per_arg[0] if k else ()), part in POINTWISE_PARTS and k > 0)
            return prev
        nodes = self.node(alias + axes, srcs, torch.Tag.pointwise in getattr(op, "tags", ()))
        if square:
            self.squares.add(nodes[0])
        return nodes

    def _variance(self, srcs: tuple[int, ...], axes: str = "") -> tuple[int, ...] | None:
        """``(x,)`` when ``mean(srcs)`` is a written-out variance, mean((x - mean(x)) ** 2) with both
        means over the same dimensions (``axes``); else None."""
        if len(srcs) != 1 or srcs[0] not in self.squares or len(self.inputs[srcs[0]]) != 1:
            return None
        sub = self.inputs[srcs[0]][0]
        if self.labels[sub] != "sub" or len(self.inputs[sub]) != 2:
            return None
        for x, m in (self.inputs[sub], self.inputs[sub][::-1]):
            if self.labels[m] == "mean" + axes and self.inputs[m] == (x,):
                return (x,)
        return None

    def graph(self, results: tuple[int, ...] | None = None) -> OpGraph:
        """The graph; given the nodes of the forward's results, less the nodes none of them reads
        (a BatchNorm's running statistics, a norm's saved mean, a variance's folded square)."""
        keep = range(len(self.labels))
        if results:
            live = set(results)
            for i in reversed(keep):
                if i in live:
                    live.update(self.inputs[i])
            keep = [i for i in keep if i in live or self.labels[i] == INPUT]
        index = {i: k for k, i in enumerate(keep)}
        return OpGraph(tuple(self.labels[i] for i in keep),
                       tuple(tuple(index[j] for j in self.inputs[i]) for i in keep),
                       tuple(self.pointwise[i] for i in keep), self.calls)


def _recorder(builder: _Builder, decompose: bool = True) -> Any:
    """A dispatch mode that runs each aten op (on meta tensors) and records it into ``builder``; an
    op in ``decompositions()`` runs as its decomposition, whose ops the mode records in its place."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Record(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.made: dict[int, tuple[Any, tuple[int, ...]]] = {}  # id(tensor) -> (tensor kept alive, nodes)
            self.frames = Frames()  # each node's home dimensions, for a reduction's label
            self.table = decompositions() if decompose else {}
            self.depth = 0  # > 0 inside a decomposition

        def source(self, t: Any) -> tuple[int, ...]:
            got = self.made.get(id(t))
            return got[1] if got is not None and got[0] is t else ()

        def mark(self, t: Any, nodes: tuple[int, ...]) -> None:
            self.made[id(t)] = (t, nodes)
            for n in nodes:  # an input, or an op's result (a view of one keeps the frame it has)
                self.frames.own(n, t)

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            import torch

            per_arg = [tuple(j for t in tree_flatten(a)[0] if isinstance(t, torch.Tensor) for j in self.source(t))
                       for a in (*args, *(kwargs or {}).values())]
            inplace = out_of_place(func) if self.table and isinstance(func, torch._ops.OpOverload) else None
            decomposition = self.table.get(inplace if inplace is not None else func)
            if decomposition is not None and any(per_arg):
                start = len(builder.labels)
                self.depth += 1
                try:
                    with self:
                        out = decomposition(*args, **(kwargs or {}))
                    if inplace is not None and out is not NotImplemented:  # x.hardtanh_(): x is now out
                        nodes = self.source(out)
                        out = func(*args, **(kwargs or {}))
                        self.mark(out, nodes)
                except OpGraphError:
                    raise
                except Exception:  # noqa: BLE001 - no decomposition for these arguments: the op as it is
                    out = NotImplemented
                finally:
                    self.depth -= 1
                if out is not NotImplemented:
                    if self.depth == 0:
                        builder.calls += builder.would_make(func, per_arg)
                    return out
                builder.truncate(start)
            out = func(*args, **(kwargs or {}))
            before = len(builder.labels)
            axes = ""
            if _op_name(func) in REDUCTIONS and args and isinstance(args[0], torch.Tensor) \
                    and len(src := self.source(args[0])) == 1:
                dims = reduced_dims(func, args, kwargs, args[0].dim())
                axes = "@" + self.frames.signature(args[0], src[0], dims)
            nodes = builder.call(func, per_arg, args, axes)
            if self.depth == 0:
                builder.calls += len(builder.labels) - before
            results = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            split = _op_name(func) in SPLIT_RESULTS and len(nodes) == len(results)
            operands = [(a, self.source(a)) for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
            pointwise = torch.Tag.pointwise in getattr(func, "tags", ())
            for k, n in enumerate(nodes):  # new nodes: an elementwise result keeps its operand's home
                if n >= before and results:
                    self.frames.add(n, results[k if split else 0], operands, pointwise)
            if len(nodes) == 1 and nodes[0] < before and len(results) == 1:  # a layout op: a copy keeps it too
                for a, src in operands:
                    if src == nodes:
                        self.frames.copy(nodes[0], results[0], a)
                        break
            for k, t in enumerate(results):  # var_mean: the variance is one node, the mean another
                self.mark(t, nodes[k:k + 1] if split else nodes)
            return out

    return Record()


def trace(code: str, decompose: bool = True) -> OpGraph:
    """The op graph of a KernelBench-format task (``Model``, ``get_inputs``, ``get_init_inputs``);
    ``decompose=False`` traces composite ops whole (the tracer before ``TRACER_VERSION`` 2)."""
    import warnings

    import torch
    from torch.utils._pytree import tree_flatten

    from kag.core.tasks import load_module

    graphs: list[OpGraph] = []
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            ns = load_module(code, "<decontam>")
            model = ns["Model"](*ns["get_init_inputs"]())
            inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
            for lower in (False, True) if decompose else (False,):
                builder = _Builder()
                recorder = _recorder(builder, lower)
                for x in inputs:
                    if isinstance(x, torch.Tensor):
                        recorder.mark(x, builder.node(INPUT, (), False))
                with recorder:
                    out = model(*inputs)
                results = tuple(j for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)
                                for j in recorder.source(t))
                graphs.append(builder.graph(results))
    except OpGraphError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure means "no graph"; the AST score still applies
        raise OpGraphError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return attrs.evolve(graphs[-1], whole=graphs[0]) if decompose else graphs[0]
