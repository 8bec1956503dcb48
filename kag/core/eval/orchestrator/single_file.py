"""KernelBench single-file solutions: a ``ModelNew`` whose kernels are built with ``load_inline``.

Trusted side, text only: nothing of the solution is imported or run here. KernelBench's format
puts the C++/CUDA sources in Python strings and builds them at import time with
``torch.utils.cpp_extension.load_inline``. Letting the candidate build them itself would put the
compiler inside the confined candidate, outside kag's build cache and its provenance records. So
the sources are read statically from the AST (string literals, module-level string constants and
their ``+`` concatenations) and written as an ordinary kag solution that goes through the one
trusted build path:

- ``cuda_sources`` -> ``kernels/NAME_torch.cu`` (load_inline's implicit headers first), compiled by
  nvcc against the torch headers (the ``_torch.cu`` kind of the cuda backend);
- ``cpp_sources`` -> ``kernels/NAME_binding.cpp`` with ``#include <torch/extension.h>`` and the
  pybind11 definitions load_inline would generate for ``functions``, registered with
  ``REGISTER_BINDING`` in the one ``cuda_extension`` module;
- ``model_new.py``: every ``load_inline(...)`` call becomes the name ``cuda_extension`` (imported at
  the top), so ``mod = load_inline(...)`` then ``mod.fn(x)`` calls the kag-built function.

The ``__global__`` kernels of those files are then the solution's own for kernel provenance, and
every guard, static and runtime, judges the converted solution exactly as a workspace. Sources
computed at run time (f-strings with values, reads from files) cannot be known statically and are
refused with the reason; so are ``load`` (files on disk) and load_inline without ``functions``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from kag.core.records import Solution

CONVERTED_FROM = "kernelbench-single-file"
LOAD_INLINE_PARAMS = ("name", "cpp_sources", "cuda_sources", "sycl_sources", "functions")
CUDA_IMPLICIT = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


class SingleFileError(ValueError):
    """A load_inline solution kag cannot read statically; the message says what to change."""


def load_inline_calls(tree: ast.Module) -> list[ast.Call]:
    """Every call of ``load_inline`` (by that name or as ``...cpp_extension.load_inline``)."""
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name == "load_inline":
                calls.append(node)
    return calls


def is_single_file(solution: Solution) -> bool:
    """A solution with no kernels/ whose model_new.py calls ``load_inline``."""
    if solution.kernels or "load_inline" not in solution.model_new:
        return False
    try:
        return bool(load_inline_calls(ast.parse(solution.model_new)))
    except (SyntaxError, ValueError):
        return False


def _constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = <string expression>`` assignments, in order (later ones win)."""
    found: dict[str, Any] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) and node.value is not None else []
        for target in targets:
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = _static_value(node.value, found)
                except SingleFileError:
                    found.pop(target.id, None)
    return found


def _static_value(node: ast.AST, names: dict[str, Any]) -> Any:
    """A string, list of strings or dict of strings written in ``node`` without running anything."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, type(None))):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)  # an f-string with no fields
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _static_value(node.left, names), _static_value(node.right, names)
        if type(left) is type(right) and isinstance(left, (str, list)):
            return left + right
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_static_value(item, names) for item in node.elts]
    if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
        return {_static_value(k, names): _static_value(v, names) for k, v in zip(node.keys, node.values)}
    raise SingleFileError(f"line {getattr(node, 'lineno', '?')}: {ast.unparse(node)[:60]!r} is not a string kag can "
                          f"read without running the file; write the sources as string literals or module-level "
                          f"string constants")


def _arguments(call: ast.Call, names: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for param, node in zip(LOAD_INLINE_PARAMS, call.args):
        args[param] = _static_value(node, names)
    for keyword in call.keywords:
        if keyword.arg in LOAD_INLINE_PARAMS:
            args[keyword.arg] = _static_value(keyword.value, names)
        elif keyword.arg is None:
            raise SingleFileError(f"line {call.lineno}: load_inline(**...) cannot be read statically; name its arguments")
    return args


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(item, str) for item in items):
        raise SingleFileError("load_inline sources must be strings or lists of strings")
    return items


def _bindings(name: str, functions: Any, line: int) -> list[str]:
    """The ``m.def`` lines load_inline generates for ``functions`` (a name, a list, or name -> doc)."""
    if functions is None:
        raise SingleFileError(f"line {line}: load_inline without functions=[...]: list the C++ functions to bind "
                              f"(kag generates the bindings as load_inline does)")
    table = {functions: functions} if isinstance(functions, str) else \
        dict(functions) if isinstance(functions, dict) else {f: f for f in functions}
    lines = []
    for fn, doc in table.items():
        if not isinstance(fn, str) or not _IDENT.match(fn):
            raise SingleFileError(f"line {line}: functions entry {fn!r} is not a C++ function name")
        doc_text = str(doc).replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'  m.def("{fn}", &{fn}, "{doc_text}");')
    return lines


def convert(solution: Solution) -> Solution:
    """The kag solution equivalent to a single-file ``solution`` (see the module docstring).

    Raises SingleFileError when the sources cannot be read statically or two calls clash."""
    text = solution.model_new
    tree = ast.parse(text)
    names = _constants(tree)
    kernels: dict[str, str] = {}
    bound: set[str] = set()
    calls = sorted(load_inline_calls(tree), key=lambda c: (c.lineno, c.col_offset))
    for index, call in enumerate(calls):
        args = _arguments(call, names)
        raw = args.get("name") if isinstance(args.get("name"), str) else f"inline{index}"
        stem = re.sub(r"\W", "_", raw) or f"inline{index}"
        stem = stem if stem[0].isalpha() else f"m_{stem}"
        if f"{stem}_binding.cpp" in kernels:
            stem = f"{stem}_{index}"
        if _as_list(args.get("sycl_sources")):
            raise SingleFileError(f"line {call.lineno}: sycl_sources are not supported; use cuda_sources")
        cuda = _as_list(args.get("cuda_sources"))
        if cuda:
            kernels[f"{stem}_torch.cu"] = CUDA_IMPLICIT + "\n".join(cuda) + "\n"
        defs = _bindings(stem, args.get("functions"), call.lineno)
        clash = bound & {d.split('"')[1] for d in defs}
        if clash:
            raise SingleFileError(f"line {call.lineno}: {', '.join(sorted(clash))} is bound by two load_inline calls; "
                                  f"kag builds them into one module, so give each function one name")
        bound |= {d.split('"')[1] for d in defs}
        kernels[f"{stem}_binding.cpp"] = (
            "// Generated by kag from a KernelBench single-file solution's load_inline call\n"
            "#include <torch/extension.h>\n#include \"binding_registry.h\"\n\n"
            + "\n".join(_as_list(args.get("cpp_sources"))) + "\n\n"
            + f"static void {stem}_kag_bind(pybind11::module& m) {{\n" + "\n".join(defs) + "\n}\n\n"
            + f"REGISTER_BINDING({stem}, {stem}_kag_bind);\n")
    return Solution(model_new=_rewrite(text, calls), kernels=kernels, ignored_files=list(solution.ignored_files))


def _rewrite(text: str, calls: list[ast.Call]) -> str:
    """``text`` with each call replaced by ``cuda_extension`` and ``import cuda_extension`` on top
    (after any ``from __future__`` imports); everything else byte for byte."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode()))
    raw = text.encode()

    def pos(lineno: int, col: int) -> int:
        return offsets[lineno - 1] + col

    out, last = [], 0
    for call in calls:  # sorted, and a load_inline call never nests another
        start, end = pos(call.lineno, call.col_offset), pos(call.end_lineno or call.lineno, call.end_col_offset or 0)
        if start < last:
            continue
        out += [raw[last:start], b"cuda_extension"]
        last = end
    body = (b"".join(out) + raw[last:]).decode()
    tree = ast.parse(text)
    after = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            after = node.end_lineno or node.lineno
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and after == 0):
            break
    body_lines = body.splitlines(keepends=True)
    note = "import cuda_extension  # kag: the load_inline sources below are built into this module\n"
    return "".join(body_lines[:after] + [note] + body_lines[after:])
