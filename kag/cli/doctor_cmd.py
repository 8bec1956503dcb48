"""``kag doctor``: which defences of the trusted evaluator this machine gives a candidate, and what
runs here (compilers, a GPU, a Docker daemon). Every line says why a layer is missing."""

from __future__ import annotations

import json

import click

from kag.cli.common import user_errors


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a list.")
@user_errors
def doctor(as_json: bool) -> None:
    """Report the candidate's confinement on this machine (Landlock, seccomp, namespaces...)."""
    from kag.core.trust.layers import confinement_support

    support = confinement_support()
    if as_json:
        click.echo(json.dumps(support, indent=2))
        return
    for layer, state in support.items():
        click.echo(f"{layer:48s} {state}")
