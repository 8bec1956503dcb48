"""``no-tampering``: the solution cannot change the evaluator, its timers or torch.

Static: assignments to attributes of torch/time/kag/builtins/sys/os (and ``setattr``/``delattr``
on them), ``sys.modules``/``builtins``/``__builtins__`` edits, ``gc``/``inspect``/``sys._getframe``
introspection, ``os._exit``/``sys.exit``/``exit``/``quit`` and C++ ``exit``/``_exit``/``abort``,
printing "PASS"-like verdicts. Runtime (a courtesy report, in the judge): the objects of torch,
time and the evaluator that model_new.py replaced, as the candidate's harness saw them at the end.
Tampering gains nothing anyway: the judge's clock times the calls and the judge compares the
outputs, in another process; the verdict never comes from the candidate's stdout.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from kag.plugin import (GuardBase, Solution, Task, Violation, dotted_name, hookimpl, import_aliases, parse_python,
                        regex_hits, resolve, solution_files)

PROTECTED_ROOTS = ("torch", "time", "kag", "builtins", "sys", "os", "gc", "inspect", "pickle", "multiprocessing",
                   "numpy", "cuda_extension", "threading", "importlib", "model")
# The precision guard owns these (allowed or flagged by the tolerance policy).
PRECISION_FLAGS = ("torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
                   "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
                   "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction")
INTROSPECTION = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "inspect.stack", "inspect.currentframe",
                 "inspect.getouterframes", "inspect.getmembers", "sys._getframe", "sys.settrace", "sys.setprofile",
                 "sys.addaudithook", "os._exit", "sys.exit", "exit", "quit", "os.kill", "os.abort",
                 "setattr", "delattr", "globals", "vars", "exec", "eval", "compile", "breakpoint")
VERDICT_WORDS = re.compile(r"\b(PASS(ED)?|SUCCESS|CORRECT|ALL TESTS PASSED|speedup)\b", re.IGNORECASE)
CPP_TAMPER = re.compile(r"\b(?:std::)?(?:_exit|_Exit|exit|quick_exit|abort)\s*\(|\bdlsym\s*\(|\bPyObject_SetAttr\w*|"
                        r"\bPySys_\w+|\bptrace\s*\(|\bmprotect\s*\(|\.attr\s*\([^)]*\)\s*=[^=]")
CPP_PRINT = re.compile(r"(?:printf|puts|cout|cerr|fprintf|py::print)[^;]*?\"[^\"]*\b(PASS(?:ED)?|SUCCESS|CORRECT)\b",
                       re.IGNORECASE)


class NoTampering(GuardBase):
    name = "no-tampering"

    def check_solution(self, solution: Solution, task: Task) -> list[Violation]:
        found: list[Violation] = []
        for file in solution_files(solution):
            if file.is_cpp:
                for line, m in regex_hits(file, CPP_TAMPER):
                    found.append(self.violation(f"{file.path}:{line}", f"{m.group(0).strip()}: exits or patches "
                                                "the process from C++"))
                for line, m in regex_hits(file, CPP_PRINT, keep_strings=True):
                    found.append(self.violation(f"{file.path}:{line}", f"prints {m.group(1)!r}: output is never the "
                                                "verdict"))
            elif file.is_python and (tree := parse_python(file.text)) is not None:
                found += self._python(file.path, tree)
        return found

    def _python(self, path: str, tree: ast.Module) -> list[Violation]:
        aliases = import_aliases(tree)
        found = []
        for node in ast.walk(tree):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = list(node.targets)
            for target in targets:
                base = target.value if isinstance(target, ast.Subscript) else target
                full = resolve(dotted_name(base), aliases) or ""
                if full in PRECISION_FLAGS:
                    continue
                if full.split(".")[0] in PROTECTED_ROOTS and ("." in full or isinstance(target, ast.Subscript)) \
                        or full.startswith(("__builtins__", "sys.modules")):
                    found.append(self.violation(where, f"assigns {full}{'[...]' if base is not target else ''}: "
                                                "patching torch, timers, the evaluator or the interpreter"))
            if isinstance(node, ast.Call):
                full = resolve(dotted_name(node.func), aliases) or ""
                if full in INTROSPECTION or full.startswith(("sys.modules.", "builtins.", "__builtins__")):
                    found.append(self.violation(where, f"{full}(): introspection, patching or exiting is not allowed"))
                elif full in ("print", "sys.stdout.write", "sys.stderr.write", "os.write"):
                    for arg in ast.walk(node):
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and VERDICT_WORDS.search(arg.value):
                            found.append(self.violation(where, f"prints {arg.value[:40]!r}: stdout is never the verdict"))
                            break
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for mod in mods:
                    if mod.split(".")[0] in ("gc", "inspect", "kag", "importlib", "builtins"):
                        found.append(self.violation(where, f"imports {mod}: introspection/evaluator access"))
        return found

    def check_observations(self, obs: Any, info: Any) -> list[Violation]:
        return [self.violation(name, "was replaced after model_new was imported (monkey-patching)")
                for name in obs.replaced]


@hookimpl
def kag_register_guards(register) -> None:
    register("no-tampering", NoTampering)
