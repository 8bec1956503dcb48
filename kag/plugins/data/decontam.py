"""The ``decontam`` filter: drop tasks whose ``Model`` is structurally a benchmark task.

The ``Model`` class is reduced to a sequence of AST tokens in which local names, ``self.``
attributes, arguments, constants and docstrings are normalised away while torch API names
(``nn.Conv2d``, ``torch.relu``, ``.softmax``) stay; two tasks' similarity is difflib's ratio of
their sequences, averaged with the ratio of the torch API names alone (so two tasks of the same
shape that call different operators are not taken for copies). Renaming a variable or reordering
imports leaves the score at 1.0.
"""

from __future__ import annotations

import ast
import difflib
import json
from pathlib import Path
from typing import Any, Iterable

from kag.core.hookspecs import hookimpl

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


class Decontaminator:
    """Scores each task against a reference set and drops those at or above ``threshold``."""

    name = "decontam"

    def __init__(self, threshold: float = 0.9, **_: Any):
        self.threshold = float(threshold)
        self.reference: list[tuple[str, list[str], list[str]]] = []

    def params(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "reference_tasks": len(self.reference)}

    def add_reference(self, items: Iterable[tuple[str, str]]) -> None:
        """``(name, code)`` pairs of benchmark tasks to compare against."""
        for name, code in items:
            toks = structural_tokens(code)
            if toks:
                self.reference.append((name, toks, api_names(toks)))

    def score(self, code: str) -> tuple[float, str | None]:
        """Highest similarity to any reference task, and which one."""
        toks = structural_tokens(code)
        api = api_names(toks)
        best, best_name = 0.0, None
        for name, ref, ref_api in self.reference:
            if _upper_bound(toks, ref, api, ref_api) <= best:
                continue
            r = 0.5 * _ratio(toks, ref) + 0.5 * _ratio(api, ref_api)
            if r > best:
                best, best_name = r, name
        return best, best_name

    def keep(self, score: float) -> bool:
        return score <= self.threshold


    def write_report(self, scores: list[float], out_dir: Path, extra: dict[str, Any] | None = None) -> None:
        write_report(scores, self.threshold, out_dir, {"reference_tasks": len(self.reference), **(extra or {})})


def write_report(scores: list[float], threshold: float, out_dir: Path, extra: dict[str, Any] | None = None) -> None:
    """``decontam.json`` (numbers, histogram counts) and ``decontam_hist.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    counts, edges = np.histogram(scores, bins=20, range=(0.0, 1.0))
    data = {"threshold": threshold, "n": len(scores), "dropped": sum(s > threshold for s in scores),
            "max": max(scores, default=None), "mean": (sum(scores) / len(scores)) if scores else None,
            "histogram": {"edges": [round(float(e), 3) for e in edges], "counts": [int(c) for c in counts]},
            **(extra or {})}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "decontam.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(scores, bins=edges, color="#4477aa")
    ax.axvline(threshold, color="#cc3311", linestyle="--", label=f"threshold {threshold}")
    ax.set_xlabel("max structural similarity to a benchmark task")
    ax.set_ylabel("tasks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "decontam_hist.png", dpi=100)
    plt.close(fig)


@hookimpl
def kag_register_filters(register) -> None:
    register("decontam", Decontaminator)
