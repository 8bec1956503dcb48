"""``no-hidden-work``: all of forward's work is done when it returns.

Static (feedback for the agent): imports of threading/multiprocessing/subprocess/concurrent/ctypes,
``os.fork``/``os.system``, CUDA stream creation in Python or C++, ``std::thread``/``fork``/``popen``
in C++, tensor subclasses.

Runtime (in the judge, on the kernel records of every call, kag.core.eval.candidate.observe): the calls of a
window must not run concurrently on the GPU, one call must not do the GPU work of the others, and
no call may launch nothing while the others launch kernels, and no kernel may be launched by a
thread other than the one calling forward (its launch lies in no call, so no call is charged with
it). A window times several calls back to back; a solution that knows it and overlaps them, or computes later calls' outputs early, would be
credited the throughput of many calls, not one call's time.

What makes hidden work pointless at run time is the judge, not this guard: the candidate is
stopped (SIGSTOP) whenever it is outside a window the judge measures, so no thread of it can work
between windows; on a GPU the window lasts until a probe kernel of the judge's finds the GPU idle,
so work left queued on any stream is timed; single-call windows bound what overlapping calls can
buy (kag.core.eval.judge.judge_timing.WindowTiming.floor_s); seccomp refuses to create processes; outputs
cross to the judge only as exact ``torch.Tensor`` (the channel refuses subclasses and lazy wrappers).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from kag.plugin import (GuardBase, Solution, Task, Violation, dotted_name, hookimpl, import_aliases, parse_python,
                        regex_hits, resolve, solution_files)

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


    def check_observations(self, obs: Any, info: Any) -> list[Violation]:
        found = []
        if obs.overlapping_calls > max(2, OVERLAP_SHARE * obs.calls):
            found.append(self.violation("ModelNew.forward", f"{obs.overlapping_calls} of {obs.calls} calls started GPU work "
                                        "before the previous call's had finished: calls of one window ran concurrently "
                                        "(each call's work must be done, on its stream, before the next call's)"))
        if obs.windows >= 4 and obs.uneven_windows > UNEVEN_WINDOWS * obs.windows:
            found.append(self.violation("ModelNew.forward", f"in {obs.uneven_windows} of {obs.windows} windows one call held "
                                        "most of the window's GPU time: calls doing the work of other calls"))
        if obs.idle_calls > max(2, IDLE_SHARE * obs.calls):
            found.append(self.violation("ModelNew.forward", f"{obs.idle_calls} of {obs.calls} calls launched no GPU work "
                                        "while the others did: their work was done by other calls"))
        if obs.thread_launches > max(2, THREAD_SHARE * obs.calls):
            found.append(self.violation("ModelNew.forward", f"{obs.thread_launches} GPU kernels were launched by a thread "
                                        "other than the one calling forward: a call's work must be launched by the call"))
        return found


OVERLAP_SHARE = 0.01
UNEVEN_WINDOWS = 0.5
IDLE_SHARE = 0.1
THREAD_SHARE = 0.01  # kernels launched by another thread, per call: an H200 gave an honest diag_matmul one such
# launch (a link Kineto did not record) in 1 of 5 evaluations; a solution's thread launches on every call


@hookimpl
def kag_register_guards(register) -> None:
    register("no-hidden-work", NoHiddenWork)
