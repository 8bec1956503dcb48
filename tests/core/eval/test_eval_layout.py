"""The evaluator's rooms (kag/core/eval/): the candidate's package, which runs in the untrusted
process, imports from kag.core.eval only the boundary module, and from the rest of kag only the
small leaf modules listed here, each with its reason. An AST check: imports inside functions count."""

import ast
from pathlib import Path

import kag

EVAL = Path(kag.__file__).resolve().parent / "core" / "eval"
ROOMS = ("orchestrator", "judge", "candidate", "serve")

# modules of kag outside kag.core.eval the candidate's harness may import, and why
CANDIDATE_LEAVES = {
    "kag.core.records": "from_dict/to_dict: the records (CandidateSpec's data, reports) cross as plain dicts",
    "kag.core.trace": "mark: the timeline's marks from inside the harness (no state of the judge)",
    "kag.core.tasks": "load_module: the task's module, loaded by the baseline runner as the judge loads it",
    "kag.core.trust.confine": "apply_seccomp: the candidate confines itself once its device is up",
    "kag.core.trust.procs": "die_with_parent, describe_exception, rebuild_plugins: process plumbing",
    "kag.core.trust.fatbin_wall": "PyTorch's CUDA kernels made unloadable before the solution exists",
    "kag.core.trust.nvrtc_wall": "the NVRTC wall: runtime compiles of PyTorch's kernels refused likewise",
}


def imported_modules(text: str, package: str = "kag.core.eval.candidate") -> set[str]:
    """Every module ``text`` imports (absolute names; ``from kag.core import scratch`` names
    ``kag.core.scratch`` too), wherever the import statement is; relative ones from ``package``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def allowed_in_candidate(name: str) -> bool:
    if not (name == "kag" or name.startswith("kag.")):
        return True  # stdlib, torch
    if name == "kag.core.eval.boundary" or name.startswith(("kag.core.eval.boundary.", "kag.core.eval.candidate")):
        return True
    return any(name == leaf or name.startswith(leaf + ".") for leaf in CANDIDATE_LEAVES) or \
        any(leaf.startswith(name + ".") for leaf in CANDIDATE_LEAVES)  # the package part of ``from X import leaf``


def test_the_candidate_package_imports_only_the_boundary_and_listed_leaves():
    files = sorted((EVAL / "candidate").glob("*.py"))
    assert {f.name for f in files} >= {"__init__.py", "candidate.py", "channel.py"}
    bad = {f"{f.relative_to(EVAL)}: {name}" for f in files for name in imported_modules(f.read_text(encoding="utf-8"))
           if not allowed_in_candidate(name)}
    assert not bad, f"the candidate's package imports outside its allow-list: {sorted(bad)}"


def test_the_check_sees_a_forbidden_import_wherever_it_is():
    """The check itself: the judge's or the orchestrator's code, at the top, in a function, relative."""
    for text in ("from kag.core.eval.judge.compare import compare_outputs\n",
                 "def f():\n    import kag.core.eval.orchestrator.guarding\n",
                 "from kag.core import plugins\n",
                 "from kag.core import scratch\n",  # the output capture's FIFO is the judge's
                 "from ..judge import judge_calls\n"):
        assert not all(allowed_in_candidate(n) for n in imported_modules(text)), text
    assert all(allowed_in_candidate(n) for n in imported_modules("from kag.core.eval.boundary import pack\n"
                                                                 "from kag.core import trace\nimport torch\n"))


def test_the_evaluator_is_its_rooms_and_the_boundary():
    """No module left flat beside the rooms: each file is in the room of the process that runs it."""
    flat = sorted(p.name for p in EVAL.glob("*.py"))
    assert flat == ["__init__.py", "boundary.py"], flat
    for room in ROOMS:
        assert (EVAL / room / "__init__.py").is_file(), room
