"""``kag build DIR``: compile a workspace's kernels with the trusted, cached build (utils/compile.sh)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kag.cli.common import make_plugins, plugin_options, user_errors


def resolve_backend(workspace: Path, backend: str | None, plugin_pairs: tuple[str, ...],
                    config_path: str | None):
    """--backend, else the workspace's .kag/workspace.json, else --plugin / kag.toml / default."""
    from kag.core.plugins import parse_plugin_options
    from kag.core.agent.workspace import read_meta

    plugins, _ = make_plugins(plugin_pairs, config_path)
    has_plugin_choice = "backend" in parse_plugin_options(plugin_pairs)
    name = backend or (None if has_plugin_choice else read_meta(workspace).get("backend"))
    return plugins.create("backend", name or plugins.selected("backend"))


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--backend", type=str, default=None, help="cuda or cpu (default: the workspace's).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where cuda_extension*.so goes (default: DIR/.kag/build).")
@click.option("--jobs", "-j", type=int, default=None, help="Parallel compiles (default: CPU count).")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True,
              help="Seconds allowed per compile.")
@click.option("--json", "as_json", is_flag=True, help="Print the BuildResult as JSON.")
@plugin_options
@user_errors
def build(directory: Path, backend: str | None, out_dir: Path | None, jobs: int | None,
          timeout_s: float, as_json: bool, plugin_pairs: tuple[str, ...], config_path: str | None) -> None:
    """Compile DIR's kernels/ into cuda_extension; exit 1 if the build failed."""
    from kag.core.eval.orchestrator.build import build_solution
    from kag.core.eval.orchestrator.feedback import format_build
    from kag.core.records import to_dict
    from kag.core.agent.workspace import WorkspaceError, build_in_workspace, read_solution

    try:
        solution = read_solution(directory)
        chosen = resolve_backend(directory, backend, plugin_pairs, config_path)
        if out_dir is None:  # into the workspace: links there are refused
            result = build_in_workspace(solution, chosen, directory, jobs=jobs, timeout_s=timeout_s)
        else:
            result = build_solution(solution, chosen, out_dir, jobs=jobs, timeout_s=timeout_s)
    except WorkspaceError as exc:
        click.echo(f"kag: error: {exc}", err=True)
        raise SystemExit(2) from None
    if as_json:
        click.echo(json.dumps(to_dict(result), indent=1))
    else:
        click.echo(format_build(result, chosen.name))
    raise SystemExit(0 if result.ok else 1)
