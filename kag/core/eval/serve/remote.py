"""One evaluation as an executor job, and ``ExecutorEvaluations``: verdicts asked for one at a time
(by an RL stage's environments) and given by an executor session's workers.

Trusted side. A job carries the task, the solution's files and the options as plain data and
names ``evaluation`` below; the worker (a thread here for ``local``, a Ray worker for ``ray``)
rebuilds the plugins from their names and runs the same trusted evaluator as a local call, every
candidate in its own confined process. Only the verdict travels back.
"""

from __future__ import annotations

import itertools
from typing import Any

from kag.core.executor import RESTART_WORKER, Job

EVALUATION_FN = "kag.core.eval.serve.remote:evaluation"


def evaluation_job(key: str, task: Any, solution: Any, options: Any, selection: dict[str, list[str]]) -> Job:
    import attrs

    from kag.core.records import to_dict

    return Job(key, EVALUATION_FN, {"task": to_dict(task), "solution": to_dict(solution),
                                    "options": attrs.asdict(options), "selection": selection})


def evaluation(task: dict[str, Any], solution: dict[str, Any], options: dict[str, Any],
               selection: dict[str, list[str]]) -> dict[str, Any]:
    """The worker's side: the verdict as plain data (a CUDA fault asks for a fresh worker)."""
    from kag.core.eval.orchestrator.evaluate import EvalOptions, evaluate
    from kag.core.executor import worker_plugins
    from kag.core.records import Solution, Task, from_dict, to_dict

    result = evaluate(from_dict(Task, task), from_dict(Solution, solution), from_dict(EvalOptions, options),
                      worker_plugins(selection))
    return {"result": to_dict(result), RESTART_WORKER: result.error_kind == "cuda_error"}


class ExecutorEvaluations:
    """Where an environment's evaluations go when a stage runs them through an executor: pass it
    as the ``pool`` of ``kag.core.agent.sandbox.evaluate_with`` (the environments do). A job that
    is lost (its worker died past the retries) or raises is the evaluator's failure: the verdict
    says so (``metadata.judge_error``) and carries the reward plugin's value for a failure."""

    def __init__(self, session: Any, plugins: Any) -> None:
        self.session, self.plugins = session, plugins
        self.selection = plugins.names_selected()
        self._ids = itertools.count()

    def evaluate(self, task: Any, solution: Any, options: Any) -> Any:
        from kag.core.agent.episode import failed_result
        from kag.core.records import EvalResult, from_dict

        outcome = self.session.call(evaluation_job(f"{task.name}#{next(self._ids)}", task, solution, options,
                                                   self.selection))
        if outcome.error is None and isinstance(outcome.value, dict) and outcome.value.get("result"):
            result = from_dict(EvalResult, outcome.value["result"])
            result.metadata["executor"] = {"worker": outcome.worker, "attempts": outcome.attempts}
            return result
        result = failed_result(task, options, self.plugins,
                               f"the evaluator failed ({outcome.worker or 'executor'}): {outcome.error}")
        result.metadata["judge_error"] = True
        result.metadata["executor"] = {"worker": outcome.worker, "attempts": outcome.attempts}
        return result

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> "ExecutorEvaluations":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
