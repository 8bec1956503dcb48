"""``kag workspace TASK DIR``: make an agent workdir (SKILL.md, model.py, utils/, ...) for a task file."""

from __future__ import annotations

from pathlib import Path

import click

from kag.cli.common import make_plugins, plugin_options, user_errors


@click.command()
@click.argument("task_file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--backend", type=str, default=None, help="A backend plugin (`kag plugins`): cuda, cpu, nvrtc [default: --plugin backend=, kag.toml, else auto: cuda when a GPU is visible, else cpu].")
@plugin_options
@user_errors
def workspace(task_file: Path, directory: Path, backend: str | None, plugin_pairs: tuple[str, ...],
              config_path: str | None) -> None:
    """Create workspace DIR for the task in TASK_FILE (a KernelBench-format .py file)."""
    from kag.core.records import Task
    from kag.core.tasks import TaskError, check_task_code
    from kag.core.agent.workspace import WorkspaceError, make_workspace

    plugins, _ = make_plugins(plugin_pairs, config_path)
    name = backend or plugins.selected("backend")
    plugins.entry("backend", name)  # an unknown name fails here, listing the valid ones
    if not task_file.is_file():
        raise TaskError(f"{task_file} not found; give a task .py file (class Model, get_inputs, get_init_inputs)")
    code = task_file.read_text(encoding="utf-8")
    check_task_code(code, str(task_file), execute=False)
    task = Task(name=task_file.stem, source="local", code=code, path=str(task_file.resolve()))
    try:
        dest = make_workspace(task, directory, backend=name)
    except WorkspaceError as exc:
        click.echo(f"kag: error: {exc}", err=True)
        raise SystemExit(2) from None
    click.echo(f"workspace for {task.name} ({name}) at {dest}")
    click.echo("next: read SKILL.md; bash utils/compile.sh; python3 utils/verification.py; "
               "python3 utils/profiling.py")
