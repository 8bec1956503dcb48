"""The ``kag`` command group. Commands live in small modules, imported only when run.

Start-up imports neither torch nor any heavy library, so ``kag --help`` stays fast; plugins may
add commands through ``kag_register_commands(cli)``.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

# command name -> "module:attribute"; loaded on first use (rLLM's lazy group idea).
LAZY_COMMANDS: dict[str, str] = {
    "plugins": "kag.cli.plugins_cmd:plugins",
    "tasks": "kag.cli.tasks_cmd:tasks",
    "score": "kag.cli.score_cmd:score",
    "verify": "kag.cli.score_cmd:verify",
    "profile": "kag.cli.score_cmd:profile",
    "data": "kag.cli.data_cmd:data",
    "workspace": "kag.cli.workspace_cmd:workspace",
    "build": "kag.cli.build_cmd:build",
    "train": "kag.cli.train_cmd:train",
    "run": "kag.cli.run_cmd:run",
    "eval": "kag.cli.eval_cmd:eval_",
    "show": "kag.cli.show_cmd:show",
    "serve": "kag.cli.serve_cmd:serve",
    "doctor": "kag.cli.doctor_cmd:doctor",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS:
            module, attr = LAZY_COMMANDS[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kag")
@click.option("-v", "--verbose", is_flag=True,
              help="Timestamped phase marks of every process of an evaluation on stderr (as KAG_TRACE=1).")
def cli(verbose: bool) -> None:
    """kag: train and evaluate LLM agents that write fast CUDA kernels.

    Pick any piece by name with --plugin KIND=NAME (see `kag plugins`).
    """
    if verbose:
        from kag.core.trace import enable

        enable()


def _add_plugin_commands() -> None:
    from kag.core.plugins import PluginError, Plugins

    try:
        Plugins().add_commands(cli)
    except PluginError as exc:
        click.echo(f"kag: warning: {exc}", err=True)


def main(argv: list[str] | None = None) -> Any:
    _add_plugin_commands()
    return cli.main(args=argv, prog_name="kag")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
