"""kag's verdict as the reward of the RL stacks people already use: verl, TRL and OpenRLHF.

Trusted side: each adapter parses a completion into a solution (kag's fenced files, or a
KernelBench single-file ``ModelNew`` with ``load_inline``; ``kag.core.solution_text``) and scores it
with the trusted evaluator (``kag.evaluate``), so the reward is the one ``kag score`` gives. A
completion with no readable solution gets the reward plugin's failure value (-1 with milestone).

The task of each sample travels in the dataset: a task file path, a dataset id such as
``kernelbench:level1/19``, or the task's code itself (``class Model`` ... ``get_inputs``).
Evaluation options (``kag.EvalOptions`` fields, plus ``backend``) come from the adapter's keywords
or, where the framework passes none (OpenRLHF), from ``$KAG_REWARD_OPTIONS`` (JSON). Exact
configuration lines for each framework are in the README ("kag as the reward of verl, TRL,
OpenRLHF").
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Sequence

from kag.core.records import EvalResult, Task

OPTIONS_ENV = "KAG_REWARD_OPTIONS"
OPENRLHF_FILE = str(Path(__file__).with_name("integrations") / "openrlhf_reward_func.py")


def env_options() -> dict[str, Any]:
    """Evaluation options from ``$KAG_REWARD_OPTIONS`` (a JSON object), {} when unset."""
    raw = os.environ.get(OPTIONS_ENV, "").strip()
    if not raw:
        return {}
    try:
        options = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"${OPTIONS_ENV} is not JSON ({exc}); set it like '{{\"backend\": \"cpu\"}}'") from None
    if not isinstance(options, dict):
        raise ValueError(f"${OPTIONS_ENV} must be a JSON object like '{{\"backend\": \"cpu\"}}'")
    return options


@functools.lru_cache(maxsize=256)
def task_from(spec: str, name: str | None = None) -> Task:
    """A sample's task: its code (when ``spec`` defines ``class Model``), else a file or dataset id."""
    import kag
    from kag.core.tasks import check_task_code

    if "class Model" in spec and "def get_inputs" in spec:
        label = name or f"task-{hashlib.sha256(spec.encode()).hexdigest()[:12]}"
        check_task_code(spec, f"<{label}>", execute=False)
        return Task(name=label, source="inline", code=spec)
    return kag.load_task(spec)


def score_completions(completions: Sequence[str], tasks: Sequence[str], **options: Any) -> list[EvalResult]:
    """The verdict on each completion for its task (same length and order), spread over the GPU pool."""
    import kag

    if len(completions) != len(tasks):
        raise ValueError(f"{len(completions)} completions but {len(tasks)} tasks: give one task per completion")
    return kag.evaluate_many([(task_from(str(t)), str(c)) for c, t in zip(completions, tasks)], **options)


def reward_of(result: EvalResult) -> float:
    return float(result.reward.value) if result.reward is not None else -1.0


def metrics_of(result: EvalResult) -> dict[str, float]:
    """Numbers every sample has (0.0 where a speed-up was not measured), for the frameworks' logs."""
    return {"correct": float(result.ok), "speedup_vs_eager": float(result.speedup_vs_eager or 0.0),
            "speedup_vs_compile": float(result.speedup_vs_compile or 0.0)}


# ---------------------------------------------------------------------------------------------
# verl: custom_reward_function.path = <this file>, custom_reward_function.name = compute_score
def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None,
                  **options: Any) -> dict[str, float]:
    """verl's reward function: the sample's ``reward_model.ground_truth`` is its task (path, id or code).

    ``options`` are ``custom_reward_function.reward_kwargs`` (EvalOptions fields, ``backend``),
    over ``$KAG_REWARD_OPTIONS``. Returns ``{"score": reward, "correct", "speedup_vs_eager",
    "speedup_vs_compile"}``: verl takes "score" as the reward and logs the rest."""
    merged = {**env_options(), **options}
    result = score_completions([solution_str], [ground_truth], **merged)[0]
    return {"score": reward_of(result), **metrics_of(result)}


# ---------------------------------------------------------------------------------------------
# TRL: GRPOTrainer(reward_funcs=[kag.reward.TRLReward(backend="cpu")], ...)
class TRLReward:
    """A TRL ``reward_funcs`` entry: one float per completion, the batch spread over the GPU pool.

    The dataset's ``task_column`` (default "task") holds each prompt's task. Conversational
    completions (lists of messages) are scored on their last message's content. When TRL passes
    ``log_metric``, the batch's pass rate and mean speed-ups are logged under ``kag/...``."""

    __name__ = "kag"

    def __init__(self, task_column: str = "task", **options: Any):
        self.task_column = task_column
        self.options = options

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        if self.task_column not in columns:
            raise ValueError(f"kag reward: the dataset has no {self.task_column!r} column (got "
                             f"{sorted(k for k in columns if isinstance(columns[k], list))}); add one with each "
                             f"prompt's task file, dataset id or code, or pass TRLReward(task_column=...)")
        texts = [completion_text(c) for c in completions]
        results = score_completions(texts, columns[self.task_column], **{**env_options(), **self.options})
        log_metric = columns.get("log_metric")
        if callable(log_metric) and results:
            for key in ("correct", "speedup_vs_eager", "speedup_vs_compile"):
                log_metric(f"kag/{key}", sum(metrics_of(r)[key] for r in results) / len(results))
        return [reward_of(r) for r in results]


def completion_text(completion: Any) -> str:
    """A completion as text: a string, or the content of the last message of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


# ---------------------------------------------------------------------------------------------
# OpenRLHF: --remote_rm_url $(python -c "import kag.reward; print(kag.reward.OPENRLHF_FILE)") --label_key task
def openrlhf_rewards(queries: list[str], prompts: list[str], labels: list[str], **options: Any) -> dict[str, Any]:
    """OpenRLHF's ``reward_func(queries, prompts, labels)``: each query is its prompt followed by
    the response (the prompt is cut off before parsing); each label is the task. Returns
    ``{"rewards", "scores", "extra_logs"}`` as tensors: rewards are kag's, scores are 1.0 for a
    solution that counts and 0.0 otherwise (for OpenRLHF's dynamic filtering)."""
    import torch

    responses = [q[q.index(p) + len(p):] if p and p in q else q for q, p in zip(queries, prompts)]
    results = score_completions(responses, labels, **{**env_options(), **options})
    logs = {key: torch.tensor([metrics_of(r)[key] for r in results]) for key in
            ("speedup_vs_eager", "speedup_vs_compile")}
    return {"rewards": torch.tensor([reward_of(r) for r in results], dtype=torch.float32),
            "scores": torch.tensor([float(r.ok) for r in results], dtype=torch.float32), "extra_logs": logs}
