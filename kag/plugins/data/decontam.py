"""The ``decontam`` filter: drop tasks that compute what a benchmark task computes (trusted side).

Three signals, the highest one is a task's score, and a score at or above ``threshold`` drops it:

- **op graph** (``kag.core.data.opgraph``): the forward traced on the meta device to aten ops under
  the core aten decompositions (``F.silu`` is ``sigmoid`` and ``mul``, ``torch.softmax`` is ``exp(x
  - amax) / sum``, ``nn.LayerNorm`` and the other normalisation layers are the mean/var/sub/div a
  written-out norm is), with module, functional and method spellings lowered to the same ops and shapes,
  names, layout ops and statement order normalised away. The same graph as a benchmark task (either
  decomposed or as called: ``OpGraph.whole``) scores 1.0; the same graph with one elementwise op
  (a primitive, or an op as called: a Mish) added or removed scores ``ONE_OP_APART`` (0.95) when
  the benchmark task calls at least ``MIN_SHARED_OPS`` ops that the two share (a fusion, not one
  level-1 operator); otherwise, against the benchmark tasks that call ``MIN_SHARED_OPS`` ops or
  more (one operator is matched by its exact graph only), the higher of the Dice overlap of the two
  graphs' (op, input ops) multisets, traced without decompositions (``OpGraph.whole``: one token
  per op as called, as before), and, for a short graph (``SHORT_GRAPH`` nodes or fewer), the Dice overlap of their op
  multisets with no edges at all, counted only at ``MULTISET_MIN`` or above (so the same ops
  wired in another order, ``leaky_relu(x) * s`` for ``leaky_relu(x * s)``, still score; a
  different count of any op does not; nor does a task of another number of tensor inputs). With the numeric signal on, a multiset match is the claim
  "another wiring of the same function", which running both settles: a benchmark task that, built
  alike, gives other outputs on the same inputs (``decontam_numeric.compare``) is another function,
  and the match is overruled (the task's graph score is then that of the graphs with their edges).
  So is a traced task's AST match (the same tokens, in another order: ``sigmoid(logsumexp(...))``).
  A task that cannot be traced (data-dependent control flow, an unrolled RNN) has only the AST signal.
- **AST**: the ``Model`` class is reduced to a sequence of AST tokens in which local names, ``self.``
  attributes, arguments, constants and docstrings are normalised away while torch API names
  (``nn.Conv2d``, ``torch.relu``, ``.softmax``) stay; two tasks' similarity is difflib's ratio of
  their sequences, averaged with the ratio of the torch API names alone (so two tasks of the same
  shape that call different operators are not taken for copies). Renaming a variable or reordering
  imports leaves it at 1.0; spelling a module as its functional call does not.
- **numeric** (kag.plugins.data.decontam_numeric), for a task the other two keep: a benchmark task
  that, built with this task's arguments and the same parameters, gives the same outputs on its
  inputs computes the same function, however it is spelled: the score is 1.0.
"""

from __future__ import annotations

import ast
import difflib
import json
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from kag.plugin import hookimpl


MODULE_NAMES = {"torch", "nn", "F", "functional", "math", "np", "numpy", "einops"}


def model_class(code: str) -> ast.ClassDef | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    return next((c for c in classes if c.name == "Model"), classes[0] if classes else None)


def structural_tokens(code: str) -> list[str]:
    """Normalised token sequence of the task's ``Model`` class (empty when there is none)."""
    cls = model_class(code)
    if cls is None:
        return []
    tokens: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstrings
        if isinstance(node, ast.Name):
            tokens.append(f"Name:{node.id}" if node.id in MODULE_NAMES else "Name")
            return
        if isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id == "self":
                tokens.append("SelfAttr")
                return
            visit(base)
            tokens.append(f"Attr:{node.attr}")
            return
        if isinstance(node, ast.Constant):
            tokens.append(f"Const:{type(node.value).__name__}")
            return
        if isinstance(node, (ast.arg, ast.alias)):
            tokens.append(type(node).__name__)
            return
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            tokens.append(f"{type(node).__name__}:{'forward' if node.name == 'forward' else ''}")
        elif isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.AugAssign)):
            op = getattr(node, "op", None) or (node.ops[0] if isinstance(node, ast.Compare) else None)
            tokens.append(f"{type(node).__name__}:{type(op).__name__}")
        elif not isinstance(node, (ast.Load, ast.Store, ast.Del, ast.operator, ast.unaryop, ast.boolop,
                                   ast.cmpop, ast.keyword, ast.arguments)):
            tokens.append(type(node).__name__)
        if isinstance(node, ast.keyword):
            tokens.append("kw")
        for child in ast.iter_child_nodes(node):
            if not (isinstance(node, (ast.FunctionDef, ast.ClassDef)) and child in getattr(node, "decorator_list", [])):
                visit(child)

    for stmt in cls.body:
        visit(stmt)
    return tokens


def api_names(tokens: list[str]) -> list[str]:
    """The operator names of a token sequence (``Attr:Conv2d``, ``Attr:relu`` ...)."""
    return [t for t in tokens if t.startswith("Attr:")]


def _ratio(a: list[str], b: list[str]) -> float:
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def similarity(a: list[str], b: list[str]) -> float:
    """Mean of the structural and the API-name difflib ratios (1.0 identical, 0.0 nothing shared)."""
    return 0.5 * _ratio(a, b) + 0.5 * _ratio(api_names(a), api_names(b))


def _upper_bound(a: list[str], b: list[str], api_a: list[str], api_b: list[str]) -> float:
    def quick(x: list[str], y: list[str]) -> float:
        if not x and not y:
            return 1.0
        return difflib.SequenceMatcher(None, x, y, autojunk=False).quick_ratio()

    return 0.5 * quick(a, b) + 0.5 * quick(api_a, api_b)


ONE_OP_APART = 0.95  # graph score of a benchmark task with one elementwise op added or removed
# ... when the ops the two share are a fusion: one level-1 operator plus an elementwise op is the
# shape of every 2-op composed task (Conv2d -> exp), a new fusion, not a copy of the level-1 task
MIN_SHARED_OPS = 2  # counted in ops as the benchmark task calls them (``OpGraph.ops``), not decomposed
# The op-multiset signal: graphs of at most SHORT_GRAPH compute nodes (after decompositions: a
# level-2 task such as Gemm -> softmax -> scale is 7), whose op multisets' Dice is MULTISET_MIN or
# more: below 20 nodes that is the same multiset, or one op more or fewer from 10 nodes on.
SHORT_GRAPH = 16
MULTISET_MIN = 0.95
OVERRULED_MAX = 3  # multiset matches a task's numeric comparisons may overrule, closest first


@attrs.frozen
class Verdict:
    """A task's score against the reference set, which task it is closest to and by which signal."""

    score: float
    closest: str | None
    signal: str  # "graph", "graph_one_op", "graph_overlap", "graph_multiset", "ast", "numeric" or "none"
    ast: float
    graph: float | None  # None when the task could not be traced
    note: str = ""  # the op added/removed, or why there is no graph


@attrs.define
class Reference:
    name: str
    tokens: list[str]
    api: list[str]
    graph: Any = None  # OpGraph, or None when the benchmark task cannot be traced
    local: Any = None
    multiset: Any = None  # the graph's op multiset, for a short graph
    inputs: int = 0  # the forward's tensor inputs (graph nodes)


def _both(graph: Any) -> list[Any]:
    """The decomposed graph and, where traced, the graph of the ops as called."""
    return [graph] + ([graph.whole] if graph.whole is not None else [])


def traced_graphs(items: list[tuple[str, str]]) -> dict[str, Any]:
    """Each task's op graph (None: it cannot be traced), from the build cache's signed store when
    the same tasks were traced before by the same torch and tracer (``opgraph.TRACER_VERSION`` and
    its source are in the key): the 250 KernelBench graphs took 43-249 s on every run."""
    import hashlib
    import inspect

    import torch

    from kag.plugin import opgraph
    from kag.plugin import cache_key_material, cache_root
    from kag.plugin import integrity

    h = hashlib.sha256(f"{torch.__version__}\0{opgraph.TRACER_VERSION}\0{inspect.getsource(opgraph)}".encode())
    for name, code in items:
        h.update(f"\0{name}\0{code}".encode())
    root = cache_root()
    store = integrity.SignedStore(root / "decontam", "decontam-graphs", cache_key_material(root))
    entry = f"{h.hexdigest()[:32]}.json"
    data = store.read(entry)
    if data is not None:
        def graph(g: list) -> Any:
            return opgraph.OpGraph(tuple(g[0]), tuple(map(tuple, g[1])), tuple(g[2]), g[3],
                                   graph(g[4]) if len(g) > 4 else None)

        return {name: None if g is None else graph(g) for name, g in json.loads(data).items()}
    graphs: dict[str, Any] = {}
    for name, code in items:
        try:
            graphs[name] = opgraph.trace(code)
        except opgraph.OpGraphError:
            graphs[name] = None
    def rows(g: Any) -> list:
        return [g.labels, g.inputs, g.pointwise, g.calls] + ([rows(g.whole)] if g.whole is not None else [])

    store.write(entry, json.dumps({name: None if g is None else rows(g) for name, g in graphs.items()}).encode())
    return graphs


class Decontaminator:
    """Scores each task against a reference set and drops those scoring at or above ``threshold``."""

    name = "decontam"

    def __init__(self, threshold: float = 0.9, op_graph: bool = True, numeric: bool = True, **_: Any):
        self.threshold = float(threshold)
        self.op_graph = bool(op_graph)
        self.numeric = bool(numeric)  # kag.plugins.data.decontam_numeric: what a task computes, by running it
        self.runnable: list[tuple[str, dict[str, Any]]] = []  # reference tasks' namespaces, for ``numeric``
        self.code: dict[str, str] = {}  # reference tasks' code, for ``numeric``: run at scaled sizes
        self.reference: list[Reference] = []
        self.exact: dict[str, str] = {}  # graph digest -> benchmark task
        self.minus_one: dict[str, tuple[str, str]] = {}  # digest of a benchmark task less one op -> (task, op)
        self.ops: dict[str, int] = {}  # benchmark task -> its ops as called (OpGraph.ops)
        self.untraced: list[str] = []  # benchmark tasks with no op graph

    def params(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "op_graph": self.op_graph, "numeric": self.numeric,
                "reference_tasks": len(self.reference),
                "reference_graphs": sum(r.graph is not None for r in self.reference)}

    def add_reference(self, items: Iterable[tuple[str, str]]) -> None:
        """``(name, code)`` pairs of benchmark tasks to compare against (their op graphs traced
        once per content, torch and tracer: ``traced_graphs``)."""
        items = list(items)
        graphs = traced_graphs(items) if self.op_graph else {}
        for name, code in items:
            if self.numeric:
                from kag.plugins.data.decontam_numeric import load

                try:
                    self.runnable.append((name, load(code)))
                    self.code[name] = code
                except Exception:  # noqa: BLE001 - a reference that does not even define itself: no numeric signal
                    pass
            toks = structural_tokens(code)
            ref = Reference(name, toks, api_names(toks))
            if self.op_graph:
                ref.graph = graphs.get(name)
                if ref.graph is None:
                    self.untraced.append(name)
            if ref.graph is not None:
                ref.local = (ref.graph.whole or ref.graph).local_tokens()
                if ref.graph.size <= SHORT_GRAPH + 1:
                    ref.multiset = ref.graph.multiset()
                    ref.inputs = ref.graph.tensor_inputs
                self.ops[name] = ref.graph.ops
                for g in _both(ref.graph):  # decomposed, and as called (a Mish is one op to take away)
                    self.exact.setdefault(g.digest(), name)
                    if ref.graph.ops - 1 >= MIN_SHARED_OPS:  # what the two share is a fusion
                        for digest, op in g.one_op_fewer():
                            self.minus_one.setdefault(digest, (name, op))
            if toks or ref.graph is not None:
                self.reference.append(ref)

    def ast_score(self, code: str, skip: frozenset[str] = frozenset()) -> tuple[float, str | None]:
        """Highest AST similarity to any reference task (but those in ``skip``), and which one."""
        toks = structural_tokens(code)
        api = api_names(toks)
        best, best_name = 0.0, None
        for ref in self.reference:
            if not ref.tokens or ref.name in skip or _upper_bound(toks, ref.tokens, api, ref.api) <= best:
                continue
            r = 0.5 * _ratio(toks, ref.tokens) + 0.5 * _ratio(api, ref.api)
            if r > best:
                best, best_name = r, ref.name
        return best, best_name

    def graph_score(self, graph: Any, overruled: frozenset[str] = frozenset()) -> tuple[float, str | None, str, str]:
        """``(score, closest, signal, note)`` of a traced task against the reference graphs (their op
        multisets but those of ``overruled``: other functions, by ``unless_other_outputs``)."""
        from kag.plugin import dice

        for g in _both(graph):
            if g.digest() in self.exact:
                return 1.0, self.exact[g.digest()], "graph", ""
        for g in _both(graph):
            for fewer, op in g.one_op_fewer() if g.size > MIN_SHARED_OPS else ():
                if fewer in self.exact and self.ops[self.exact[fewer]] >= MIN_SHARED_OPS:
                    return ONE_OP_APART, self.exact[fewer], "graph_one_op", f"benchmark task plus {op}"
            if g.digest() in self.minus_one:
                name, op = self.minus_one[g.digest()]
                return ONE_OP_APART, name, "graph_one_op", f"benchmark task less {op}"
        # graded: against fusions only. One benchmark operator decomposed (softmax: 5 nodes) and a
        # task of it plus an op overlap at 0.92; that is a 2-op task, and its exact graph is above
        fusions = [ref for ref in self.reference if ref.graph is not None and ref.graph.ops >= MIN_SHARED_OPS]
        local, best, best_name = (graph.whole or graph).local_tokens(), 0.0, None
        for ref in fusions:
            if (d := dice(local, ref.local)) > best:
                best, best_name = d, ref.name
        multiset, m_best, m_name = graph.multiset(), 0.0, None
        inputs = graph.tensor_inputs
        if 2 <= graph.size <= SHORT_GRAPH:
            for ref in fusions:
                if ref.multiset is not None and ref.name not in overruled and ref.inputs == inputs \
                        and (d := dice(multiset, ref.multiset)) > m_best:
                    m_best, m_name = d, ref.name
        if m_best >= MULTISET_MIN and m_best > best:
            return m_best, m_name, "graph_multiset", ("the same ops wired otherwise" if m_best == 1.0
                                                      else "one op apart, edges aside")
        return best, best_name, "graph_overlap", ""

    def judge(self, code: str) -> Verdict:
        """All signals for one task; the highest one decides."""
        from kag.plugin import OpGraphError, trace

        graph_s, note, overruled, ran = None, "", [], {}
        if self.op_graph and self.exact:
            try:
                graph = trace(code)
            except OpGraphError as exc:
                note = f"no op graph: {exc}"
            else:
                (graph_s, graph_name, signal, note), overruled = self.unless_other_outputs(
                    code, lambda skip: self.graph_score(graph, skip), lambda got: got[2] == "graph_multiset", ran)
        # a traced task's token match is a claim of the same code, which running both settles too
        (ast_s, ast_name), also = self.unless_other_outputs(
            code, lambda skip: self.ast_score(code, skip),
            lambda got: graph_s is not None and got[0] >= self.threshold and got[0] > graph_s, ran)
        if overruled or also:
            note = "; ".join(filter(None, [note, f"the ops or tokens of {', '.join(dict.fromkeys(overruled + also))}, "
                                                 "but other outputs on the same inputs"]))
        if graph_s is not None and graph_s >= ast_s:
            verdict = Verdict(graph_s, graph_name, signal, ast_s, graph_s, note)
        else:
            verdict = Verdict(ast_s, ast_name, "ast" if ast_name else "none", ast_s, graph_s, note)
        if self.numeric and self.runnable and verdict.score < self.threshold:
            from kag.plugins.data.decontam_numeric import check

            found, why = check(code, self.runnable)
            if found:
                return Verdict(1.0, found[0], "numeric", ast_s, graph_s,
                               f"the same outputs as {', '.join(found[:3])} on its inputs")
            if found is None:
                verdict = attrs.evolve(verdict, note="; ".join(filter(None, [verdict.note, why])))
        return verdict

    def unless_other_outputs(self, code: str, best: Callable[[frozenset[str]], tuple],
                             claim: Callable[[tuple], bool], ran: dict[str, str | None]) -> tuple[tuple, list[str]]:
        """``best(overruled)`` (a score and its closest task first) and the tasks overruled: while it is
        a match that claims "the same function, otherwise written" (``claim``: an op-multiset or a token
        match) and, numeric on, the closest task built alike gives other outputs on the same inputs
        (``decontam_numeric.compare``), the next closest. The exact and one-op-apart graphs are not
        claims of that kind (a copy with another constant is still a copy), so nothing overrules them.
        ``ran`` keeps the comparisons made for this task."""
        overruled: list[str] = []
        got = best(frozenset())
        while self.numeric and claim(got) and got[1] in self.code and len(overruled) < OVERRULED_MAX:
            from kag.plugins.data.decontam_numeric import compare

            if got[1] not in ran:
                ref = next(ns for n, ns in self.runnable if n == got[1])
                ran[got[1]] = compare(code, ref, self.code[got[1]])[0]
            if ran[got[1]] != "different":
                break
            overruled.append(got[1])
            got = best(frozenset(overruled))
        return got, overruled

    def score(self, code: str) -> tuple[float, str | None]:
        """Highest similarity to any reference task (by either signal), and which one."""
        v = self.judge(code)
        return v.score, v.closest

    def keep(self, score: float) -> bool:
        """Kept below the threshold; at or above it the task is a benchmark copy and dropped."""
        return score < self.threshold

    def write_report(self, scores: list[float], out_dir: Path, extra: dict[str, Any] | None = None) -> None:
        write_report(scores, self.threshold, out_dir, {**self.params(), "untraced_reference": self.untraced,
                                                       **(extra or {})})


def write_report(scores: list[float], threshold: float, out_dir: Path, extra: dict[str, Any] | None = None) -> None:
    """``decontam.json`` (numbers, histogram counts) and ``decontam_hist.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    counts, edges = np.histogram(scores, bins=20, range=(0.0, 1.0))
    data = {"threshold": threshold, "n": len(scores), "dropped": sum(s >= threshold for s in scores),
            "max": max(scores, default=None), "mean": (sum(scores) / len(scores)) if scores else None,
            "histogram": {"edges": [round(float(e), 3) for e in edges], "counts": [int(c) for c in counts]},
            **(extra or {})}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "decontam.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(scores, bins=edges, color="#4477aa")
    ax.axvline(threshold, color="#cc3311", linestyle="--", label=f"threshold {threshold}")
    ax.set_xlabel("similarity to the closest benchmark task (op graph or AST)")
    ax.set_ylabel("tasks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "decontam_hist.png", dpi=100)
    plt.close(fig)


@hookimpl
def kag_register_filters(register) -> None:
    register("decontam", Decontaminator)
