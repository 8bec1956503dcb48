"""``kag plugins``: every kind, its items, where each came from, and whether it runs here."""

from __future__ import annotations

import json

import click

from kag.cli.common import make_plugins, plugin_options, user_errors
from kag.core.hookspecs import KINDS
from kag.core.plugins import MULTI_KINDS


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@plugin_options
@user_errors
def plugins(as_json: bool, plugin_pairs: tuple[str, ...], config_path: str | None) -> None:
    """List plugins by kind: name, origin (built-in or distribution), selected, runnable here."""
    pl, _ = make_plugins(plugin_pairs, config_path)
    rows = []
    for kind in KINDS:
        chosen = set(pl.selected_all(kind)) if kind in MULTI_KINDS else _selected_or_none(pl, kind)
        for name in pl.names(kind):
            entry = pl.entry(kind, name)
            reason = entry.availability()
            rows.append({"kind": kind, "name": name, "origin": entry.origin, "selected": name in chosen,
                         "available": reason is None, "reason": reason})
    if as_json:
        kinds = {kind: [r for r in rows if r["kind"] == kind] for kind in KINDS}
        click.echo(json.dumps({"kinds": kinds}, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table("kind", "name", "origin", "selected", "runs here")
    for r in rows:
        # escape: a reason's "kag[rl]" is text, not rich markup
        table.add_row(*map(escape, (r["kind"], r["name"], r["origin"])), "*" if r["selected"] else "",
                      "yes" if r["available"] else escape(f"no: {r['reason']}"))
    Console().print(table)


def _selected_or_none(pl, kind: str) -> set[str]:
    try:
        return {pl.selected(kind)}
    except Exception:
        return set()
