"""kag: train and evaluate LLM agents that turn PyTorch modules into faster CUDA.

The public API (stable; see kag.api and the README's "Python API" section)::

    import kag
    result = kag.evaluate("examples/relu/cpu/model.py", "examples/relu/cpu", backend="cpu")

Names are imported on first use, so ``import kag`` (and ``kag --help``) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["evaluate", "evaluate_many", "load_task", "load_solution", "parse_completion", "EvalOptions",
           "EvalResult", "Task", "Solution", "TaskError", "AnswerFormatError", "__version__"]

_WHERE = {
    "evaluate": "kag.api", "evaluate_many": "kag.api", "load_task": "kag.api", "load_solution": "kag.api",
    "parse_completion": "kag.core.solution_text", "AnswerFormatError": "kag.core.solution_text",
    "EvalOptions": "kag.core.eval.orchestrator.evaluate", "EvalResult": "kag.core.records", "Task": "kag.core.records",
    "Solution": "kag.core.records", "TaskError": "kag.core.tasks",
}

if TYPE_CHECKING:
    from kag.api import evaluate, evaluate_many, load_solution, load_task
    from kag.core.eval.orchestrator.evaluate import EvalOptions
    from kag.core.records import EvalResult, Solution, Task
    from kag.core.solution_text import AnswerFormatError, parse_completion
    from kag.core.tasks import TaskError


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
