"""``no-hidden-work``: all of forward's work is done, in this thread's view, when it returns.

Runtime: outputs are exactly ``torch.Tensor`` (recursively; no subclass, and the same structure as
the reference's when the judge sends it), materialised (storage and a valid ``data_ptr``), and no
Python thread, OS thread or child process started during forward is left behind. Static: imports
of threading/multiprocessing/subprocess/concurrent/ctypes, ``os.fork``/``os.system``, CUDA stream
creation in Python or C++, ``std::thread``/``fork``/``popen`` in C++, tensor subclasses.
Work on non-default streams is also made to count by the evaluator's device-wide synchronise.
"""

from __future__ import annotations

import ast
import os
import re
import threading
from typing import Any, Callable

from kag.core.guarding import (ForwardInfo, GuardBase, describe_types, dotted_name, import_aliases, parse_python,
                               regex_hits, resolve, solution_files)
from kag.core.hookspecs import hookimpl
from kag.core.records import Solution, Task, Violation

BAD_MODULES = ("threading", "_thread", "multiprocessing", "subprocess", "concurrent", "ctypes", "cffi", "asyncio",
               "signal", "pty", "socket")
BAD_CALLS = ("os.fork", "os.forkpty", "os.system", "os.popen", "os.spawn", "os.exec", "os.posix_spawn",
             "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.streams", "torch.Stream",
             "torch.multiprocessing", "torch.Tensor._make_subclass", "torch.Tensor._make_wrapper_subclass")
CPP_HIDDEN = re.compile(r"\bcudaStreamCreate\w*|\bgetStreamFromPool\b|\bcudaStreamPerThread\b|\bcuStreamCreate\w*|"
                        r"\bstd::thread\b|\bstd::async\b|\bstd::jthread\b|\bpthread_create\b|\bfork\s*\(|\bvfork\s*\(|"
                        r"\bpopen\s*\(|\bsystem\s*\(|\bposix_spawn\w*|\bexecv\w*\s*\(|\bclone\s*\(\s*\w+\s*,")


def _subclasses_tensor(node: ast.ClassDef, aliases: dict[str, str]) -> bool:
    return any((resolve(dotted_name(b), aliases) or "") in ("torch.Tensor", "torch._C.TensorBase") for b in node.bases)


class NoHiddenWork(GuardBase):
    name = "no-hidden-work"
    nesting = 90

    def check_solution(self, solution: Solution, task: Task) -> list[Violation]:
        found: list[Violation] = []
        for file in solution_files(solution):
            if file.is_cpp:
                for line, m in regex_hits(file, CPP_HIDDEN):
                    found.append(self.violation(f"{file.path}:{line}", f"{m.group(0).rstrip('( ')}: work outside "
                                                "the caller's thread/stream (hidden from timing)"))
                continue
            tree = parse_python(file.text) if file.is_python else None
            if tree is None:
                continue
            aliases = import_aliases(tree)
            for node in ast.walk(tree):
                where = f"{file.path}:{getattr(node, 'lineno', 0)}"
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    for mod in mods:
                        if mod.split(".")[0] in BAD_MODULES or mod.startswith("torch.multiprocessing"):
                            found.append(self.violation(where, f"imports {mod}: threads/processes/native calls "
                                                        "hide work from the timer"))
                elif isinstance(node, ast.Call):
                    full = resolve(dotted_name(node.func), aliases) or ""
                    if full.startswith(BAD_CALLS):
                        found.append(self.violation(where, f"{full}: work outside the caller's thread/stream"))
                    elif full == "__import__" or full.startswith("importlib."):
                        found.append(self.violation(where, f"{full}: dynamic import"))
                elif isinstance(node, ast.ClassDef) and _subclasses_tensor(node, aliases):
                    found.append(self.violation(where, f"class {node.name} subclasses torch.Tensor (lazy/deferred "
                                                "outputs are not allowed)"))
                elif isinstance(node, ast.FunctionDef) and node.name in ("__torch_dispatch__", "__torch_function__"):
                    found.append(self.violation(where, f"defines {node.name}: a tensor subclass that can defer work"))
        return found

    def check_forward(self, call: Callable[[], Any], info: ForwardInfo) -> tuple[Any, list[Violation]]:
        py_before = set(threading.enumerate())
        os_before = _os_threads()
        kids_before = _children()
        result = call()
        found: list[Violation] = []
        found += [self.violation("outputs", d) for d in output_problems(result)]
        if info.reference_output_types is not None and describe_types(result) != info.reference_output_types:
            found.append(self.violation("outputs", f"output types {describe_types(result)} differ from the "
                                        f"reference's {info.reference_output_types}"))
        new_py = [t for t in threading.enumerate() if t not in py_before and t.is_alive()]
        if new_py:
            found.append(self.violation("threads", f"{len(new_py)} Python thread(s) started in forward are still "
                                        f"running ({', '.join(t.name for t in new_py[:3])})"))
        new_os = _os_threads() - os_before
        if new_os and not new_py:
            found.append(self.violation("threads", f"{len(new_os)} OS thread(s) started in forward are still "
                                        "running (std::thread/pthread/OpenMP started after the checks)"))
        new_kids = _children() - kids_before
        if new_kids:
            found.append(self.violation("processes", f"forward started child process(es) {sorted(new_kids)[:5]} "
                                        "that are still alive"))
        return result, found


def output_problems(obj: Any, where: str = "output") -> list[str]:
    """Exact-type and materialisation problems of an output tree."""
    import torch

    if isinstance(obj, (list, tuple)):
        return [p for i, x in enumerate(obj) for p in output_problems(x, f"{where}[{i}]")]
    if isinstance(obj, dict):
        return [p for k, x in obj.items() for p in output_problems(x, f"{where}[{k!r}]")]
    if not isinstance(obj, torch.Tensor):
        return []
    if type(obj) is not torch.Tensor:
        return [f"{where} is a {type(obj).__module__}.{type(obj).__qualname__}, not exactly torch.Tensor "
                "(a subclass can defer or fake the work)"]
    if obj.numel() == 0:
        return []
    try:
        nbytes = obj.untyped_storage().nbytes()
        ptr = obj.data_ptr()
    except Exception as exc:  # noqa: BLE001 - a wrapper without storage
        return [f"{where} has no real storage ({type(exc).__name__}: {exc})"]
    if nbytes == 0 or ptr == 0:
        return [f"{where} is not materialised (storage {nbytes} bytes, data_ptr {ptr:#x})"]
    if obj.is_meta:
        return [f"{where} is a meta tensor (no data)"]
    return []


def _os_threads() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _children() -> set[int]:
    """Live processes whose parent is this process or that share its process group."""
    me, group = os.getpid(), os.getpgrp()
    kids: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return kids
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 3 and fields[0] != "Z" and (int(fields[1]) == me or (int(fields[2]) == group and group != 0
                                                                               and group == me)):
            kids.add(int(entry))
    return kids


@hookimpl
def kag_register_guards(register) -> None:
    register("no-hidden-work", NoHiddenWork)
