"""The guard protocol: static checks of a solution's sources, and checks of what its calls did.

A guard plugin (kind ``guard``) is an object with a ``name`` and either or both of
``check_solution(solution, task) -> list[Violation]`` (before the build) and
``check_observations(observations, info) -> list[Violation]``. Both run on the trusted side: the
first on the sources, the second in the judge on the ``Observations`` (kag.core.eval.candidate.observe) that a
profiler running through EVERY call of the candidate (correctness checks and timed calls alike)
recorded. Every guard takes the same options (``GuardOptions``) so the evaluator can pass one set
to all of them. The Protocols (``Guard``, ``StaticGuard``, ``ObservationGuard``) live in
kag.core.contracts.

Guards are feedback and policy (no PyTorch compute, kernels of one's own), never what the verdict's
integrity rests on: timing is the judge's clock (kag.core.eval.judge.judge_timing), correctness is the judge's
comparison on inputs the candidate cannot predict, and confinement (kag.core.trust.confine) keeps the
candidate away from the judge and the host. A verdict holds with every guard switched off.
"""

from __future__ import annotations

import ast
import re
import sys
from typing import Any, Iterable

import attrs

from kag.core.contracts import Guard  # noqa: F401 - the contract (with StaticGuard, ObservationGuard), re-exported
from kag.core.records import Solution, Task, Violation

TOLERANCE_POLICIES = ("cuda-agent", "strict")


@attrs.define(frozen=True)
class GuardOptions:
    """Options every guard accepts: library policy (paper: cuBLAS for GEMM, cuDNN for conv) and the
    tolerance policy (the precision guard flags half/bf16/TF32 only under ``strict``)."""

    allow_cublas: bool = True
    allow_cudnn: bool = True
    tolerance: str = attrs.field(default="cuda-agent")

    @tolerance.validator
    def _check_tolerance(self, _attr: Any, value: str) -> None:
        if value not in TOLERANCE_POLICIES:
            raise ValueError(f"guard option tolerance={value!r}: choose one of {', '.join(TOLERANCE_POLICIES)}")


@attrs.define
class RunInfo:
    """What the judge knows about the run a guard judges: the device, where the solution's sources
    and built extension are (trusted copies: the provenance guard reads its kernel names there) and
    the library policy."""

    device: str = "cpu"  # "cuda" or "cpu"
    solution_dir: str | None = None  # holds model_new.py and kernels/
    extension_path: str | None = None  # the built cuda_extension*.so
    allow_cublas: bool = True
    allow_cudnn: bool = True


class GuardBase:
    """Common constructor: ``Guard(allow_cublas=..., allow_cudnn=..., tolerance=...)``."""

    name = "guard"

    def __init__(self, **options: Any) -> None:
        self.options = GuardOptions(**options)

    def violation(self, where: str, what: str) -> Violation:
        return Violation(guard=self.name, detail=f"{where}: {what}" if where else what)


# ---------------------------------------------------------------------------------------------
# running guards
def run_static_guards(guards: Iterable[Any], solution: Solution, task: Task) -> list[Violation]:
    found: list[Violation] = []
    for guard in guards:
        check = getattr(guard, "check_solution", None)
        if callable(check):
            found += list(check(solution, task) or [])
    return found


def run_observation_guards(guards: Iterable[Any], observations: Any, info: RunInfo) -> list[Violation]:
    """Every guard's ``check_observations`` on what the candidate's calls did (in the judge)."""
    found: list[Violation] = []
    for guard in guards:
        check = getattr(guard, "check_observations", None)
        if callable(check):
            found += list(check(observations, info) or [])
    return found


# ---------------------------------------------------------------------------------------------
# sources
@attrs.define
class SourceFile:
    path: str  # as reported: model_new.py, kernels/foo.cu
    text: str

    @property
    def is_python(self) -> bool:
        return self.path.endswith(".py")

    @property
    def is_cpp(self) -> bool:
        return self.path.endswith((".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp"))


def solution_files(solution: Solution) -> list[SourceFile]:
    files = [SourceFile("model_new.py", solution.model_new)]
    for key in sorted(solution.kernels):
        rel = key if key.startswith("kernels/") else f"kernels/{key}"
        files.append(SourceFile(rel, solution.kernels[key]))
    return files


def parse_python(text: str) -> ast.Module | None:
    """The AST, or None for a syntax error (the import will fail and say so)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def strip_cpp_comments(text: str, keep_strings: bool = False) -> str:
    """Blank out comments (and string literals unless ``keep_strings``), keeping line numbers."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(text[i:j] if keep_strings else c + " " * max(0, j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def regex_hits(file: SourceFile, pattern: re.Pattern[str], keep_strings: bool = False) -> list[tuple[int, re.Match[str]]]:
    """(line, match) for every match of ``pattern`` in a C++/CUDA file outside comments."""
    clean = strip_cpp_comments(file.text, keep_strings=keep_strings)
    return [(line_of(clean, m.start()), m) for m in pattern.finditer(clean)]


def dotted_name(node: ast.AST) -> str | None:
    """``torch.nn.functional.relu`` for an Attribute/Name chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> full module/attribute path for every import (``F`` -> torch.nn.functional)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def resolve(name: str | None, aliases: dict[str, str]) -> str | None:
    """Expand the first component of a dotted name through the import aliases."""
    if name is None:
        return None
    head, _, rest = name.partition(".")
    full = aliases.get(head, head)
    return f"{full}.{rest}" if rest else full


# ---------------------------------------------------------------------------------------------
# runtime helpers
def solution_location(default: str = "") -> str:
    """``model_new.py:LINE`` of the innermost frame of the solution's Python code, else ``default``."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.replace("\\", "/").endswith("/model_new.py") or frame.f_code.co_filename == "model_new.py":
            return f"model_new.py:{frame.f_lineno}"
        frame = frame.f_back
    return default


def describe_types(obj: Any) -> Any:
    """A plain-data picture of an output's types: ``"torch.Tensor"``, lists/tuples/dicts of them."""
    if isinstance(obj, (list, tuple)):
        return {"type": type(obj).__name__, "items": [describe_types(x) for x in obj]}
    if isinstance(obj, dict):
        return {"type": "dict", "items": {str(k): describe_types(v) for k, v in obj.items()}}
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}".replace("torch._tensor.Tensor", "torch.Tensor")
