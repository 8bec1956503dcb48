"""``no-torch-fallback``: the solution's compute must run in its own kernels, not in PyTorch.

Runtime (in the judge, on ``Observations``): the profiler that runs through every call of the
candidate records each ATen operator called inside ``ModelNew.forward`` (Python calls,
``torch.ops`` and C++ ``torch::``/``at::`` calls from the binding all pass through the
dispatcher's RecordFunction) and torch.compile's markers. Static: the AST of ``model_new.py`` and a
scan of ``kernels/*`` (``fallback_static.py``), for early feedback with file and line.

The allow-list (``ALLOWED_OPS``) is kag.core.trust.torch_ops' (shared with provenance by symbols).
"""

from __future__ import annotations

from typing import Any

from kag.plugin import GuardBase, RunInfo, Solution, Task, Violation, hookimpl, is_allowed_op


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
