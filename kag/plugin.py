"""kag's public plugin API: everything a plugin may import from kag, in one module.

A plugin (built in or third party: they are registered alike) imports kag only from here::

    from kag.plugin import hookimpl, Reward, EvalResult

    class SpeedupReward:
        name = "speedup"
        def __call__(self, result: EvalResult) -> float:
            return result.speedup_vs_eager or 0.0 if result.correct else -1.0

    @hookimpl
    def kag_register_rewards(register):
        register("speedup", SpeedupReward)

What is named here is kept stable across minor versions; anything else under ``kag.core`` may move
(a test checks that every shipped plugin imports only from here). The sections follow what a plugin
does: register (the hook marker and the hook specs), honour a contract (one Protocol per kind:
kag.core.contracts), read and write the records, and use the helpers the built-in plugins use. The
whole guide, one section per kind with an example that installs with pip: docs/plugins.md.

Names are imported on first use (PEP 562), so importing this module costs nothing, and ``kag
--help`` stays fast however many plugins import it.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from kag import __version__ as KAG_VERSION  # the installed kag's version (workers compare theirs with it)

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))  # the kag package's folder (a container mounts it)

_SECTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "registering": {
        "kag.core.hookspecs": ("hookimpl", "Register"),
        "kag.core.plugins": ("Plugins", "PluginError", "BUILTIN", "DEFAULT_PLUGINS"),
        "kag.core.config": ("load_config",),
        "kag.core.extras": ("missing", "install_hint"),
    },
    "contracts (one Protocol per kind)": {
        "kag.core.contracts": ("Dataset", "AgentTool", "SandboxHandle", "Sandbox", "SandboxEvaluator", "Baseline",
                               "Reward", "Guard", "StaticGuard", "BuildGuard", "ObservationGuard", "Tolerance",
                               "Policy", "Algorithm", "Backend", "Environment", "Crawler", "Composer",
                               "ExecutionFilter", "DecontamFilter", "Filter", "Executor", "MetricSink", "KIND_CONTRACTS"),
    },
    "records": {
        "kag.core.records": ("Task", "Solution", "EvalResult", "Violation", "Message", "ToolCall", "Turn",
                             "Trajectory", "to_dict", "from_dict", "append_jsonl", "read_jsonl"),
        "kag.core.solution_text": ("AnswerFormatError", "parse_solution_blocks"),
        "kag.core.interrupt": ("STOP", "StopRequested"),
    },
    "tasks (datasets)": {
        "kag.core.tasks": ("LoadedTasks", "SkippedFile", "TaskError", "check_task_code", "collect", "load_module",
                           "parse_dataset_spec", "parse_ids", "read_text"),
    },
    "guards": {
        "kag.core.eval.orchestrator.guarding": ("GuardBase", "GuardOptions", "RunInfo", "SourceFile", "dotted_name",
                                   "import_aliases", "parse_python", "regex_hits", "resolve", "solution_files",
                                   "strip_cpp_comments"),
        "kag.core.trust.symbols": ("demangle", "refused_imports"),
        "kag.core.trust.torch_ops": ("ALLOWED_OPS", "is_allowed_op"),
    },
    "agent (tools, policies, environments, sandboxes)": {
        "kag.core.agent.toolkit": ("Tool", "ToolContext", "ToolError", "ToolOutput", "PARSE_ERROR_KEY",
                                   "PROTECTED_PATHS", "RAW_ARGS_KEY", "build_tools", "tool_schemas"),
        "kag.core.agent.policy": ("PolicyError", "PolicyStep", "TOOL_CALL_RE", "message_from_openai",
                                  "messages_to_openai", "new_call_id", "parse_tool_call_text", "step_from_tokens"),
        "kag.core.agent.environment": ("StepResult", "as_step_result", "play_episode", "plain_info", "step_error",
                                       "truncation"),
        "kag.core.agent.episode": ("Episode", "SYSTEM_PROMPT", "failed_result", "task_prompt"),
        "kag.core.agent.sandbox": ("CommandResult", "evaluate_with"),
        "kag.core.agent.trajectory": ("load_trajectories",),
        "kag.core.agent.workspace": ("read_solution", "skill_text"),
    },
    "evaluation (backends, baselines, sandboxes that run the evaluator)": {
        "kag.core.eval.orchestrator.evaluate": ("COMPILE_MODES", "EvalOptions", "evaluate", "finish_verdict", "backend_device",
                                   "guard_options", "needs_build", "static_violations"),
        "kag.core.eval.orchestrator.build": ("BuildResult", "BuildSetupError", "build_solution", "cache_key_material",
                                "cache_root", "tool_version", "torch_info", "trusted_stores"),
        "kag.core.eval.orchestrator.baseline_cache": ("BaselineCache", "baseline_key", "cache_key"),
        "kag.core.eval.orchestrator.gpu_pool": ("cuda_home", "default_pool", "gpu_arch", "list_gpus", "pick_backend"),
        "kag.core.eval.orchestrator.timing_lock": ("TimingSlot", "host_work", "slot_name"),
        "kag.core.eval.orchestrator.judge_process": ("JUDGES_PER_EPISODE", "keep_judges_warm"),
        "kag.core.eval.serve.remote": ("ExecutorEvaluations",),
    },
    "executors": {
        "kag.core.executor": ("ExecutorStats", "Job", "JobOutcome", "LocalExecutor", "call_job", "wants_restart"),
    },
    "data (crawlers, composers, filters)": {
        "kag.core.data.synthesis": ("CRAWL_CHOICES", "CRAWL_SHAPES", "SIZE_PROFILES", "ComposeError", "ComposedTask",
                                    "CrawlResult", "Seed", "Step", "SynthesisError", "expand", "fill_values",
                                    "probe_output", "render_task", "sample_shape"),
        "kag.core.data.opgraph": ("OpGraphError", "dice", "trace"),
    },
    "trusted-side helpers (sandboxes)": {
        "kag.core.trust.confine": ("landlock_abi",),
        "kag.core.trust.safefs": ("NO_LINKS",),
    },
}
# whole modules a plugin may use as such
_MODULES = {"scratch": "kag.core.scratch", "opgraph": "kag.core.data.opgraph", "safefs": "kag.core.trust.safefs",
            "integrity": "kag.core.trust.integrity"}

_WHERE: dict[str, str] = {name: module for section in _SECTIONS.values() for module, names in section.items()
                          for name in names}
__all__ = sorted([*_WHERE, *_MODULES, "KAG_VERSION", "PACKAGE_DIR"])


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
    else:
        raise AttributeError(f"kag.plugin has no {name!r}: the public names are listed in kag.plugin.__all__ "
                             f"(docs/plugins.md); ask for one in an issue rather than importing kag.core")
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from kag.core import scratch
    from kag.core.agent.environment import StepResult, as_step_result, plain_info, play_episode, step_error, truncation
    from kag.core.agent.episode import SYSTEM_PROMPT, Episode, failed_result, task_prompt
    from kag.core.agent.policy import (TOOL_CALL_RE, PolicyError, PolicyStep, message_from_openai,
                                       messages_to_openai, new_call_id, parse_tool_call_text, step_from_tokens)
    from kag.core.agent.sandbox import CommandResult, evaluate_with
    from kag.core.agent.toolkit import (PARSE_ERROR_KEY, PROTECTED_PATHS, RAW_ARGS_KEY, Tool, ToolContext, ToolError,
                                        ToolOutput, build_tools, tool_schemas)
    from kag.core.agent.trajectory import load_trajectories
    from kag.core.agent.workspace import read_solution, skill_text
    from kag.core.config import load_config
    from kag.core.contracts import (KIND_CONTRACTS, AgentTool, Algorithm, Backend, Baseline, BuildGuard, Composer,
                                    Crawler, Dataset, DecontamFilter, Environment, ExecutionFilter, Executor, Filter,
                                    Guard, MetricSink, ObservationGuard, Policy, Reward, Sandbox, SandboxEvaluator,
                                    SandboxHandle, StaticGuard, Tolerance)
    from kag.core.data import opgraph
    from kag.core.data.opgraph import OpGraphError, dice, trace
    from kag.core.data.synthesis import (CRAWL_CHOICES, CRAWL_SHAPES, SIZE_PROFILES, ComposedTask, ComposeError,
                                         CrawlResult, Seed, Step, SynthesisError, expand, fill_values, probe_output,
                                         render_task, sample_shape)
    from kag.core.eval.orchestrator.baseline_cache import BaselineCache, baseline_key, cache_key
    from kag.core.eval.orchestrator.build import (BuildResult, BuildSetupError, build_solution, cache_key_material, cache_root,
                                     tool_version, torch_info, trusted_stores)
    from kag.core.eval.orchestrator.evaluate import (COMPILE_MODES, EvalOptions, backend_device, evaluate, finish_verdict,
                                        guard_options, needs_build, static_violations)
    from kag.core.eval.orchestrator.gpu_pool import cuda_home, default_pool, gpu_arch, list_gpus, pick_backend
    from kag.core.eval.orchestrator.guarding import (GuardBase, GuardOptions, RunInfo, SourceFile, dotted_name, import_aliases,
                                        parse_python, regex_hits, resolve, solution_files, strip_cpp_comments)
    from kag.core.eval.orchestrator.judge_process import JUDGES_PER_EPISODE, keep_judges_warm
    from kag.core.eval.serve.remote import ExecutorEvaluations
    from kag.core.eval.orchestrator.timing_lock import TimingSlot, host_work, slot_name
    from kag.core.executor import ExecutorStats, Job, JobOutcome, LocalExecutor, call_job, wants_restart
    from kag.core.extras import install_hint, missing
    from kag.core.hookspecs import Register, hookimpl
    from kag.core.interrupt import STOP, StopRequested
    from kag.core.plugins import BUILTIN, DEFAULT_PLUGINS, PluginError, Plugins
    from kag.core.records import (EvalResult, Message, Solution, Task, ToolCall, Trajectory, Turn, Violation,
                                  append_jsonl, from_dict, read_jsonl, to_dict)
    from kag.core.solution_text import AnswerFormatError, parse_solution_blocks
    from kag.core.tasks import (LoadedTasks, SkippedFile, TaskError, check_task_code, collect, load_module,
                                parse_dataset_spec, parse_ids, read_text)
    from kag.core.trust import integrity, safefs
    from kag.core.trust.confine import landlock_abi
    from kag.core.trust.safefs import NO_LINKS
    from kag.core.trust.symbols import demangle, refused_imports
    from kag.core.trust.torch_ops import ALLOWED_OPS, is_allowed_op
