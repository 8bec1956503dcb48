"""kag's public Python API: load a task, read a solution, evaluate it. Re-exported by ``kag``.

Trusted side: these run the trusted evaluator (``kag.core.eval.orchestrator.evaluate``); a solution is only read
here (files or text), never imported. What is stable: the names in ``kag.__all__`` and the
keyword options of ``evaluate`` (the fields of ``EvalOptions``, plus ``backend="auto"``).

    import kag
    task = kag.load_task("examples/relu/cpu/model.py")        # or "kernelbench:level1/19"
    result = kag.evaluate(task, "examples/relu/cpu", backend="cpu", num_timed=20)
    result.ok, result.reward.value, result.speedup_vs_compile
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable, Union

import attrs

from kag.core.records import EvalResult, Solution, Task
from kag.core.tasks import TaskError

TaskLike = Union[Task, str, "os.PathLike[str]"]
SolutionLike = Union[Solution, str, "os.PathLike[str]"]
DATASET_ID = re.compile(r"^(?P<dataset>[\w.-]+):(?:level)?(?P<level>\d+)/(?P<pid>\d+)(?:_\S*)?$")


def load_task(spec: TaskLike, *, plugins: Any = None, config: Any = None) -> Task:
    """A Task from a task file (``model.py`` with Model, get_inputs, get_init_inputs), a dataset id
    such as ``kernelbench:level1/19`` (paths and options from ``kag.toml``), or a Task as is.

    Raises TaskError (one line: the spec and the fix) when it is neither."""
    if isinstance(spec, Task):
        return spec
    from kag.core.tasks import check_task_code

    text = os.fspath(spec)
    path = Path(text).expanduser()
    if path.is_file():
        code = path.read_text(encoding="utf-8")
        check_task_code(code, str(path), execute=False)
        # a workspace's model.py is named after its folders (examples/relu/cpu/model.py -> relu/cpu)
        parents = path.resolve().parent
        name = path.stem if path.stem != "model" else f"{parents.parent.name}/{parents.name}".strip("/")
        return Task(name=name, source="file", code=code, path=str(path))
    match = DATASET_ID.match(text)
    if not match:
        raise TaskError(f"task {text!r}: no such file, and not a dataset id; pass a task .py file or an id "
                        f"like kernelbench:level1/19")
    plugins, config = _plugins_and_config(plugins, config)
    from kag.core.tasks import parse_dataset_spec

    name, data_path = parse_dataset_spec(match["dataset"])
    options = config.options("datasets", name)
    if data_path:
        options["path"] = data_path
    options.update(level=match["level"], ids=match["pid"])
    loaded = plugins.create("dataset", name, **options).load()
    if not loaded.tasks:
        why = "; ".join(f"{s.path}: {s.reason}" for s in loaded.skipped) or "no task with that level and id"
        raise TaskError(f"task {text!r}: {why}")
    return loaded.tasks[0]


def load_solution(source: SolutionLike) -> Solution:
    """A Solution from a folder (``model_new.py`` + ``kernels/``: a workspace or solution folder),
    a ``model_new.py`` file (a KernelBench single-file solution), a model's completion text (kag's
    fenced files, or one ```python block with a single-file ``ModelNew``), or a Solution as is.

    Raises TaskError (a path that is not a solution) or AnswerFormatError (text with no solution)."""
    if isinstance(source, Solution):
        return source
    from kag.core.solution_text import parse_completion

    text = os.fspath(source)
    looks_like_path = "\n" not in text and len(text) < 4096
    path = Path(text).expanduser() if looks_like_path else None
    if path is not None and path.is_dir():
        if not (path / "model_new.py").is_file():
            raise TaskError(f"{path}: no model_new.py; a solution is model_new.py plus kernels/")
        from kag.core.agent.workspace import WorkspaceError, read_solution

        try:
            return read_solution(path)
        except WorkspaceError as exc:  # e.g. a link in kernels/: one line, not a traceback
            raise TaskError(f"{path}: {exc}") from None
    if path is not None and path.is_file() and path.suffix == ".py":
        return Solution(model_new=path.read_text(encoding="utf-8"))
    if looks_like_path and not isinstance(source, str):
        raise TaskError(f"{text}: no such solution folder or model_new.py")
    return parse_completion(text)


def make_options(backend: str = "auto", **options: Any) -> Any:
    """``EvalOptions`` from keywords (its field names); ``backend="auto"`` picks cuda when usable.
    An unknown keyword is a TypeError that lists the known ones."""
    from kag.core.eval.orchestrator.evaluate import EvalOptions
    from kag.core.eval.orchestrator.gpu_pool import pick_backend

    known = {f.name for f in attrs.fields(EvalOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"unknown evaluation option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if "baselines" in options:
        options["baselines"] = tuple(options["baselines"])
    if options.get("guards") is not None:
        options["guards"] = tuple(options["guards"])
    return EvalOptions(backend=pick_backend(backend), **options)


def evaluate(task: TaskLike, solution: SolutionLike, *, backend: str = "auto", plugins: Any = None,
             **options: Any) -> EvalResult:
    """The trusted verdict on ``solution`` for ``task``: built, guarded, checked on secret inputs,
    timed against eager and torch.compile, rewarded (``EvalResult``; ``result.ok`` when it counts).

    ``task``: anything ``load_task`` takes; ``solution``: anything ``load_solution`` takes; options:
    the fields of ``kag.EvalOptions`` (num_checks, num_timed, warmup, tolerance, reward, seed, ...).
    Never raises for what the solution does; raises TaskError/AnswerFormatError/TypeError for bad
    arguments. Solution text with no readable solution gets the failure verdict (reward -1)."""
    from kag.core.eval.orchestrator.evaluate import evaluate as trusted_evaluate
    from kag.core.solution_text import AnswerFormatError

    eval_options = make_options(backend, **options)
    plugins, _ = _plugins_and_config(plugins, None)
    the_task = load_task(task, plugins=plugins)
    try:
        the_solution = load_solution(solution)
    except AnswerFormatError as exc:
        return unreadable(the_task, eval_options, plugins, f"unparseable answer: {exc}")
    return trusted_evaluate(the_task, the_solution, eval_options, plugins)


def evaluate_many(pairs: Iterable[tuple[TaskLike, SolutionLike]], *, backend: str = "auto", plugins: Any = None,
                  max_workers: int | None = None, **options: Any) -> list[EvalResult]:
    """``evaluate`` for each (task, solution), in order, spread over the GPU pool: as many at once
    as there are devices (one on the cpu backend, which times on the one CPU)."""
    import concurrent.futures

    from kag.core.eval.orchestrator.gpu_pool import default_pool

    items = list(pairs)
    chosen = make_options(backend, **options).backend
    plugins, _ = _plugins_and_config(plugins, None)
    if max_workers is None:
        max_workers = 1 if chosen == "cpu" else max(1, len(default_pool().devices))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(items) or 1))) as pool:
        futures = [pool.submit(evaluate, task, solution, backend=chosen, plugins=plugins, **options)
                   for task, solution in items]
        return [future.result() for future in futures]


def unreadable(task: Task, options: Any, plugins: Any, reason: str) -> EvalResult:
    """The failure verdict (and reward) for a completion with no solution in it."""
    from kag.core.agent.episode import failed_result

    return failed_result(task, options, plugins, reason)


def _plugins_and_config(plugins: Any, config: Any) -> tuple[Any, Any]:
    """The plugin selection and kag.toml of the current directory, as the CLI has them."""
    if plugins is not None and config is not None:
        return plugins, config
    from kag.core.config import load_config
    from kag.core.hookspecs import KINDS
    from kag.core.plugins import Plugins

    config = config or load_config(None)
    if plugins is None:
        config.check_sections(KINDS)
        plugins = Plugins()
        plugins.select(config.plugins)
    return plugins, config
