"""``kag show``: a readable transcript of recorded trajectories."""

from __future__ import annotations

import click

from kag.cli.common import user_errors


@click.command()
@click.argument("path", type=click.Path(exists=True))
@click.option("--episode", help="Only this episode id (default: all in the file).")
@click.option("--full", is_flag=True, help="Do not shorten long messages.")
@user_errors
def show(path: str, episode: str | None, full: bool) -> None:
    """Print the transcript of PATH (a trajectories.jsonl or a run's output folder)."""
    from kag.core.agent.trajectory import iter_trajectories, render_transcript

    shown = 0
    for traj in iter_trajectories(path):
        if episode and traj.episode_id != episode:
            continue
        click.echo(render_transcript(traj, max_chars=None if full else 4000))
        click.echo("")
        shown += 1
    if not shown:
        raise click.ClickException(f"no trajectory{' ' + episode if episode else ''} in {path}")
