"""``kag tasks``: load a dataset, check every task, list them (and any skipped file)."""

from __future__ import annotations

import json
import time

import click

from kag.cli.common import make_plugins, open_dataset, plugin_options, user_errors
from kag.core.records import to_dict


@click.command()
@click.option("--dataset", "dataset_spec", required=True, metavar="NAME[:PATH]",
              help="e.g. kernelbench:~/KernelBench, ops6k:data.parquet, local:my_tasks/")
@click.option("--level", help="KernelBench level(s), e.g. 1 or 1,2.")
@click.option("--ids", help="Problem ids / row numbers, e.g. 1-20,23.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--code", is_flag=True, help="Include each task's code in the JSON.")
@plugin_options
@user_errors
def tasks(dataset_spec: str, level: str | None, ids: str | None, as_json: bool, code: bool,
          plugin_pairs: tuple[str, ...], config_path: str | None) -> None:
    """List the tasks of a dataset; broken files are named and skipped, the rest still load."""
    pl, config = make_plugins(plugin_pairs, config_path)
    start = time.perf_counter()
    loaded = open_dataset(pl, config, dataset_spec, level=level, ids=ids).load()
    elapsed = time.perf_counter() - start
    if as_json:
        items = []
        for t in loaded.tasks:
            d = to_dict(t)
            if not code:
                d.pop("code")
            items.append(d)
        click.echo(json.dumps({"tasks": items, "skipped": [to_dict(s) for s in loaded.skipped],
                               "count": len(loaded.tasks), "load_seconds": round(elapsed, 3)}, indent=2))
    else:
        for t in loaded.tasks:
            click.echo(t.name)
        click.echo(f"{len(loaded.tasks)} tasks loaded in {elapsed:.2f} s, {len(loaded.skipped)} skipped", err=True)
    for s in loaded.skipped:
        click.echo(f"kag: skipped {s.path}: {s.reason}", err=True)
