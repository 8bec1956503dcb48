"""``kag score`` (build + guards + correctness + timing + reward), ``kag verify`` and ``kag profile``.

``--task`` takes a task file (``model.py``) or a dataset id such as ``kernelbench:level1/19``;
``--solution`` a workspace or solution folder (``model_new.py`` + ``kernels/``). ``--workspace DIR``
is short for ``--task DIR/model.py --solution DIR`` (what the skill scripts pass). Exit status, as
test and lint tools have it: 0 the solution passed, 1 the verdict failed (build, guard, mismatch,
crash, timeout: reward -1), 2 bad usage or input. Where each baseline's time
came from (the cache and its age, or timed now) is in ``metadata.baseline_cache`` (see
``kag.core.eval.orchestrator.baseline_cache.BaselineCache.obtain``) and on the baseline's line of the text report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import click

from kag.cli.common import make_plugins, plugin_options, progress_status, quiet_option, user_errors
from kag.core.eval.orchestrator.evaluate import COMPILE_MODES
from kag.core.tasks import TaskError

def resolve_task(spec: str, plugins: Any, config: Any) -> Any:
    """A task file path or ``DATASET:levelN/ID`` -> Task (``kag.load_task``)."""
    from kag.api import load_task

    return load_task(spec, plugins=plugins, config=config)


def read_solution_dir(path: Path) -> Any:
    """A workspace/solution folder -> Solution (``kag.load_solution``)."""
    if not path.is_dir():
        raise TaskError(f"--solution {path}: not a directory; pass the folder holding model_new.py and kernels/")
    from kag.api import load_solution

    return load_solution(path)


def result_json(result: Any) -> dict[str, Any]:
    """The EvalResult as JSON with the documented keys always present."""
    from kag.core.records import to_dict

    data = to_dict(result)
    times = data.get("times_ms") or {}
    data["times_ms"] = {k: times.get(k) for k in ("candidate", "eager", "compile")} | times
    return data


def print_report(result: Any, echo: Callable[[str], None] = click.echo) -> None:
    from kag.core.eval.orchestrator.feedback import format_eval

    echo(format_eval(result))


TIMING_ONLY = ("compile_mode", "num_timed", "warmup", "no_baseline_cache")  # not for verify
CHECKS_ONLY = ("num_checks",)  # not for profile
PROFILE_ONLY = ("reference",)


def _eval_options(mode: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of ``kag MODE``: each command shows only those it uses."""
    skip = set()
    if mode == "verify":
        skip |= set(TIMING_ONLY)
    if mode == "profile":
        skip |= set(CHECKS_ONLY)
    if mode != "profile":
        skip |= set(PROFILE_ONLY)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for opt in reversed([o for o in _all_options() if _dest(o) not in skip]):
            command = opt(command)
        return quiet_option(plugin_options(command))

    return decorate


def _dest(option: Callable[..., Any]) -> str:
    """The parameter name a click.option decorator binds (applied to a throwaway function)."""
    return option(lambda: None).__click_params__[-1].name


def _all_options() -> list[Callable[..., Any]]:
    return [
        click.option("--task", "task_spec", metavar="FILE_OR_ID", help="Task file or id, e.g. kernelbench:level1/19."),
        click.option("--solution", "solution_dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Folder with model_new.py and kernels/."),
        click.option("--workspace", type=click.Path(file_okay=False, path_type=Path),
                     help="A workspace: task = DIR/model.py, solution = DIR."),
        click.option("--backend", default="auto", show_default=True,
                     help="A backend plugin (`kag plugins`): cuda, cpu, nvrtc; auto: cuda when a GPU is visible, else cpu."),
        click.option("--tolerance", help="Tolerance policy (cuda-agent, strict); default: the selected plugin."),
        click.option("--compile-mode", default="default", show_default=True, type=click.Choice(COMPILE_MODES)),
        click.option("--num-checks", type=click.IntRange(1), default=5, show_default=True),
        click.option("--num-timed", type=click.IntRange(1), default=100, show_default=True),
        click.option("--warmup", type=click.IntRange(0), default=10, show_default=True),
        click.option("--no-baseline-cache", is_flag=True, help="Re-time the baselines instead of using the cache."),
        click.option("--build-timeout", type=click.FloatRange(1), default=180.0, show_default=True,
                     help="Seconds one source file may take to compile."),
        click.option("--no-static-guards", is_flag=True,
                     help="Skip every guard's source check: the verdict comes from the runtime defences alone."),
        click.option("--seed", type=int, help="Fix the input seed (default: secret and random)."),
        click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object."),
        click.option("--server", "server", envvar="KAG_EVAL_SERVER", metavar="SOCKET",
                     help="Evaluate through a running `kag serve` (judges kept warm: seconds faster); "
                          "default: $KAG_EVAL_SERVER, else in this process."),
        click.option("--reference", is_flag=True,
                     help="Analyse the reference instead (its kernels, eager/compile times, target); "
                          "automatic while model_new.py is still the starter."),
    ]


def _run(mode: str, task_spec: str | None, solution_dir: Path | None, workspace: Path | None, backend: str,
         tolerance: str | None, build_timeout: float, no_static_guards: bool, seed: int | None, as_json: bool,
         server: str | None, plugin_pairs: tuple[str, ...], config_path: str | None, quiet: bool = False,
         compile_mode: str = "default",
         num_checks: int = 5, num_timed: int = 100, warmup: int = 10, no_baseline_cache: bool = False,
         reference: bool = False) -> int:
    """Evaluate as ``mode`` says and print the result; returns the exit status."""
    import attrs

    from kag.core.eval.orchestrator.evaluate import EvalOptions, Timeouts, evaluate
    from kag.core.eval.orchestrator.gpu_pool import pick_backend

    if workspace is not None:
        if task_spec is None and not (workspace / "model.py").is_file():
            raise TaskError(f"--workspace {workspace}: not a workspace (no model.py there); make one with "
                            f"`kag workspace TASK.py {workspace}`, or pass --task and --solution")
        task_spec = task_spec or str(workspace / "model.py")
        solution_dir = solution_dir or workspace
    if not task_spec or solution_dir is None:
        raise click.UsageError("pass --task and --solution, or --workspace DIR")
    plugins, config = make_plugins(plugin_pairs, config_path)
    task = resolve_task(task_spec, plugins, config)
    solution = read_solution_dir(solution_dir)
    if tolerance:
        plugins.entry("tolerance", tolerance)
    options = EvalOptions(
        backend=pick_backend(backend), tolerance=tolerance, compile_mode=compile_mode, num_checks=num_checks,
        num_timed=num_timed, warmup=warmup, use_baseline_cache=not no_baseline_cache, seed=seed,
        do_correctness=mode in ("score", "verify"), do_timing=mode in ("score", "profile"),
        timeouts=attrs.evolve(Timeouts(), build_s=build_timeout), static_guards=not no_static_guards,
    )
    if not server:  # a backend this machine cannot run is a usage error, not the solution's failure
        why = plugins.entry("backend", options.backend).availability()
        if why:
            raise click.UsageError(f"--backend {options.backend} cannot run on this machine: {why} "
                                   f"(pass --backend cpu, or --server SOCKET of a machine that can)")
    if mode == "profile":
        from kag.core.eval.orchestrator.analysis import analyse_reference, format_analysis, is_untouched

        if reference or is_untouched(task, solution):
            from kag.core.eval.orchestrator.evaluate import backend_device

            analysis = analyse_reference(task, backend_device(options.backend, plugins), compile_mode)
            click.echo(json.dumps(analysis, indent=2) if as_json else format_analysis(analysis))
            return 0
    with progress_status(quiet, f"kag {mode}: {task.name}") as say:
        if server:
            from kag.core.eval.serve.server import evaluate_remote

            say(f"kag {mode}: {task.name}: evaluating on the server {server}")
            result = evaluate_remote(server, task, solution, options, plugins)
        else:
            result = evaluate(task, solution, options, plugins,
                              progress=lambda phase: say(f"kag {mode}: {task.name}: {phase}"))
    if as_json:
        click.echo(json.dumps(result_json(result), indent=2))
    else:
        print_report(result)
    # profile checks nothing: it fails only when the solution did not build or run
    return verdict_status(result.error is None if mode == "profile" else result.ok)


def verdict_status(passed: bool) -> int:
    return 0 if passed else 1


@click.command()
@_eval_options("score")
@user_errors
def score(**kwargs: Any) -> None:
    """Build, guard, check and time a solution, and compute its reward.

    Exit status: 0 passed, 1 the verdict failed (reward -1), 2 bad usage or input."""
    raise SystemExit(_run("score", **kwargs))


@click.command()
@_eval_options("verify")
@user_errors
def verify(**kwargs: Any) -> None:
    """Build, guard and check a solution (no timing).

    Exit status: 0 correct, 1 the verdict failed (build, guard, mismatch, crash), 2 bad usage or input."""
    raise SystemExit(_run("verify", **kwargs))


@click.command()
@_eval_options("profile")
@user_errors
def profile(**kwargs: Any) -> None:
    """Time a solution against eager and torch.compile (no correctness checks).

    Exit status: 0 timed, 1 it did not build or run, 2 bad usage or input."""
    raise SystemExit(_run("profile", **kwargs))
