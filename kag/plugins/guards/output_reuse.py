"""``no-output-reuse``: outputs are computed on every call, into memory the kernel writes.

Static (feedback for the agent): state that outlives a call (``static`` tensors/maps/pointers and
``__device__`` buffers in C++, ``global`` statements, ``lru_cache``, ``data_ptr()`` keys and
forward returning something stored on ``self`` in Python).

What catches reuse at run time is the judge, not this guard: every correctness check writes fresh
secret inputs into the SAME input tensors (so a pointer- or shape-keyed cache returns a stale
output, which mismatches), the candidate poisons the memory its next output will likely get, and
the outputs of secretly chosen timed calls are compared as they happen (kag.core.eval.judge.judge_timing).
"""

from __future__ import annotations

import ast
import re

from kag.plugin import (GuardBase, Solution, Task, Violation, dotted_name, hookimpl, parse_python, regex_hits,
                        solution_files)

# A static (or thread_local) VARIABLE holding tensors, maps, pointers or counters; not a function.
CPP_STATE = re.compile(
    r"\bstatic\s+(?:thread_local\s+)?(?:(?:torch|at)::Tensor\b|std::(?:unordered_)?map\s*<[^;]*?>|"
    r"std::vector\s*<\s*(?:torch|at)::Tensor\s*>|(?:c10|std)::optional\s*<\s*(?:torch|at)::Tensor\s*>|"
    r"(?!char\b|const\b|constexpr\b)[\w:]+\s*\*|(?:unsigned\s+)?(?:int|long|size_t|int64_t|uint64_t|int32_t|bool)\b)"
    r"\s*\**\s*\w+\s*(?:=|;|\{|\[)")
DEVICE_BUFFER = re.compile(r"^\s*(?:static\s+)?__device__\s+(?!__forceinline__|inline|__noinline__)[\w:<>\s]+?"
                           r"\b\w+\s*\[[^\]]*\]\s*;", re.MULTILINE)


class NoOutputReuse(GuardBase):
    name = "no-output-reuse"

    def check_solution(self, solution: Solution, task: Task) -> list[Violation]:
        found: list[Violation] = []
        for file in solution_files(solution):
            if file.is_cpp:
                for line, m in regex_hits(file, CPP_STATE):
                    found.append(self.violation(f"{file.path}:{line}", f"'{m.group(0).strip()}': state kept across "
                                                "calls (outputs must be computed on every call)"))
                for line, m in regex_hits(file, DEVICE_BUFFER):
                    found.append(self.violation(f"{file.path}:{line}", "a global __device__ buffer outlives the call "
                                                "(allocate outputs per call)"))
            elif file.is_python:
                found += self._python(file.path, file.text)
        return found

    def _python(self, path: str, text: str) -> list[Violation]:
        tree = parse_python(text)
        if tree is None:
            return []
        found = []
        for node in ast.walk(tree):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                found.append(self.violation(where, f"'{type(node).__name__.lower()} {', '.join(node.names)}': "
                                            "state kept across calls"))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    name = dotted_name(dec.func if isinstance(dec, ast.Call) else dec) or ""
                    if name.split(".")[-1] in ("lru_cache", "cache", "cached_property"):
                        found.append(self.violation(where, f"@{name} caches results across calls"))
                if node.name == "forward":
                    found += self._forward(path, node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "data_ptr":
                found.append(self.violation(where, "data_ptr() in model_new.py (pointer-keyed caching?)"))
        return found

    def _forward(self, path: str, fn: ast.FunctionDef) -> list[Violation]:
        stored = {dotted_name(t) for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign))
                  for t in (n.targets if isinstance(n, ast.Assign) else [n.target])}
        stored |= {dotted_name(t.value) for n in ast.walk(fn) if isinstance(n, ast.Assign)
                   for t in n.targets if isinstance(t, ast.Subscript)}
        stored = {s for s in stored if s and s.startswith("self.")}
        found = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None:
                for sub in ast.walk(node.value):
                    name = dotted_name(sub) if isinstance(sub, (ast.Attribute, ast.Name)) else None
                    if name in stored:
                        found.append(self.violation(f"{path}:{node.lineno}", f"forward returns {name}, which it "
                                                    "stores on the module: a cached output"))
                        break
        return found


@hookimpl
def kag_register_guards(register) -> None:
    register("no-output-reuse", NoOutputReuse)
