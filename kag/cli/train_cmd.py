"""``kag train STAGE --config FILE``: the paper's staged RL recipe, one stage per command, or all
of them in one run directory with ``kag train recipe``; ``kag train report RUN_DIR`` writes its page
(several RUN_DIRs: one page over seeds, with bands).

Order: warmup -> collect -> rft -> value-pretrain -> agentic. Each stage reads ``[train]`` and
``[train.STAGE]`` from the config, writes ``output_dir/checkpoint`` and ``metrics.jsonl``, and
resumes from its checkpoint when rerun.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any, Callable

import click

from kag.cli.common import USER_ERRORS, interrupted, parse_key_values

STAGE_HELP = {
    "warmup": "Single-turn PPO: the model answers each task in one message, the environment scores it "
              "(GAE over response tokens, clipped policy + value updates).",
    "collect": "Play multi-turn episodes with the current actor through the environment and append them "
               "as trajectory records (token ids and log-probs kept) to `data` (JSONL).",
    "rft": "Rejection fine-tuning: keep collected trajectories with reward > rft_min_reward and no invalid "
           "actions, repeats or loops; fine-tune the actor on their model tokens only.",
    "value-pretrain": "Fit the critic (actor backbone + value head) to GAE returns on collected "
                      "trajectories before agentic PPO uses its advantages.",
    "agentic": "Multi-turn PPO from the RFT actor (init_from) and pretrained critic (critic_from); "
               "tool/observation tokens are masked and add no GAE decay.",
}


def run_stage(stage: str, config_path: str, sets: tuple[str, ...] = (), plugin_pairs: tuple[str, ...] = ()) -> dict[str, Any]:
    """Load the config, pick plugins, run one stage; returns its summary."""
    from kag.core.config import load_config
    from kag.core.plugins import Plugins, parse_plugin_options

    overrides = parse_key_values(sets, "--set", "steps=5")  # a typo fails before anything is loaded
    config = load_config(config_path)
    data = dict(config.data)
    train = dict(data.get("train", {}))
    stage_table = dict(train.get(stage, {}))
    stage_table.update(overrides)
    train[stage] = stage_table
    data["train"] = train
    plugins = Plugins()
    plugins.select(config.plugins)
    plugins.select(parse_plugin_options(plugin_pairs))
    return plugins.create("algorithm", stage, config_data=data, stage=stage, where=str(config_path),
                          plugins=plugins).run()


def _stage_sets(sets: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``--set KEY=VALUE`` -> {"": {KEY: VALUE}}; ``--set STAGE.KEY=VALUE`` -> {STAGE: {KEY: VALUE}}."""
    from kag.plugins.algorithms.ppo.config import STAGES

    out: dict[str, dict[str, Any]] = {}
    for key, value in parse_key_values(sets, "--set", "warmup.steps=5").items():
        stage, dot, name = key.partition(".")
        if dot and stage not in STAGES:
            raise click.BadParameter(f"{key!r}: {stage!r} is not a stage ({', '.join(STAGES)})", param_hint="--set")
        out.setdefault(stage if dot else "", {})[name if dot else key] = value
    return out


def run_recipe_command(config_path: str, sets: tuple[str, ...], plugin_pairs: tuple[str, ...],
                       run_dir: str | None) -> dict[str, Any]:
    from kag.core.config import load_config
    from kag.core.plugins import Plugins, parse_plugin_options
    from kag.plugins.algorithms.ppo.recipe import run_recipe

    overrides = _stage_sets(sets)
    config = load_config(config_path)
    data = dict(config.data)
    train = dict(data.get("train", {}))
    train.update(overrides.pop("", {}))
    for stage, values in overrides.items():
        train[stage] = {**train.get(stage, {}), **values}
    data["train"] = train
    plugins = Plugins()
    plugins.select(config.plugins)
    plugins.select(parse_plugin_options(plugin_pairs))
    return run_recipe(data, str(config_path), plugins, lambda line: click.echo(line, err=True), run_dir)


def _stop_safely(what: str, call: Callable[[], dict[str, Any]]) -> None:
    """Run ``call`` with Ctrl-C stopping it at its next step boundary (checkpointed, exit 130);
    print its summary as JSON; bad input is one line and exit 2."""
    from kag.core.interrupt import StopRequested, stop_at_safe_points

    previous = stop_at_safe_points(lambda: click.echo(f"kag train {what}: stopping after this step, with a checkpoint "
                                                      f"(Ctrl-C again to quit at once)", err=True))
    launched = int(os.environ.get("WORLD_SIZE") or 1) > 1
    if launched:  # the deepspeed launcher passes a Ctrl-C on to its ranks as SIGTERM: the same safe stop
        previous_term = signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGINT))
    try:
        summary = call()
    except (*USER_ERRORS, ValueError, FileNotFoundError) as exc:
        click.echo(f"kag: error: {exc}", err=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt as exc:  # StopRequested: checkpointed; a bare one: between safe points
        why = str(exc) if isinstance(exc, StopRequested) else "stopped before the first step ended"
        interrupted(f"kag train {what}: interrupted: {why}; the same command resumes")
    finally:
        signal.signal(signal.SIGINT, previous)
        if launched:
            signal.signal(signal.SIGTERM, previous_term)
    if os.environ.get("RANK", "0") == "0":  # under a launcher, rank 0 speaks for every rank
        click.echo(json.dumps(summary, default=str, indent=1))


def _stage_command(stage: str, help_text: str | None = None) -> click.Command:
    @click.command(name=stage, help=help_text or STAGE_HELP[stage])
    @click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
                  help="TOML with [train] and [train." + stage + "] tables (and [environments.NAME]).")
    @click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                  help="Override a train setting, e.g. --set steps=5 (repeatable; VALUE as in the TOML config).")
    @click.option("--plugin", "plugin_pairs", multiple=True, metavar="KIND=NAME",
                  help="Choose a plugin by name (repeatable).")
    def command(config_path: str, sets: tuple[str, ...], plugin_pairs: tuple[str, ...]) -> None:
        _stop_safely(stage, lambda: run_stage(stage, config_path, sets, plugin_pairs))

    return command


class _StageOrder(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # pipeline order, not alphabetical

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """A stage of the recipe, or any other registered algorithm (a plugin's: ``kag train NAME`` runs
        it as a stage, with ``[train]`` and ``[train.NAME]``); plugins are loaded only for a name
        that is not a built-in command, so ``kag train --help`` stays fast."""
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name not in ("recipe", "report"):
            from kag.core.plugins import Plugins

            if cmd_name in Plugins().registry.get("algorithm", {}):
                command = _stage_command(cmd_name, f"The registered algorithm {cmd_name!r} as a training stage.")
        return command


@click.group(cls=_StageOrder, help=(
    "Train the agent in the paper's stages: warmup -> collect -> rft -> value-pretrain -> agentic "
    "(one at a time, or `kag train recipe` for all in one run directory); `kag train NAME` runs any "
    "other registered algorithm (`kag plugins`) as a stage.\n\n"
    "Every stage reads one TOML config ([train], [train.STAGE] and [environments.NAME] tables), "
    "checkpoints to output_dir/checkpoint (rerun to resume) and logs metrics.jsonl (and TensorBoard "
    "when installed). model = \"tiny\" builds a ~100k-parameter local model for CPU runs."
))
def train() -> None:
    pass


for _stage in STAGE_HELP:
    train.add_command(_stage_command(_stage))


@train.command(name="recipe")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="TOML with [train] (run_dir = \"runs/NAME\"), [train.STAGE] tables and [environments.NAME].")
@click.option("--run-dir", "run_dir", type=click.Path(file_okay=False), default=None,
              help="Run directory (overrides [train] run_dir): STAGE/ per stage, recipe.json, report.md.")
@click.option("--set", "sets", multiple=True, metavar="[STAGE.]KEY=VALUE",
              help="Override a setting for every stage (steps=5) or one (warmup.steps=5); repeatable.")
@click.option("--plugin", "plugin_pairs", multiple=True, metavar="KIND=NAME", help="Choose a plugin by name (repeatable).")
def recipe(config_path: str, run_dir: str | None, sets: tuple[str, ...], plugin_pairs: tuple[str, ...]) -> None:
    """The whole recipe in one run directory: warmup -> collect -> rft -> value-pretrain -> agentic,
    each stage reading the earlier ones' actor, trajectories and critic, then report.md.

    Rerun the same command to resume: finished stages are skipped and the stage that stopped resumes
    from its own checkpoint (every save_every steps; Ctrl-C saves one and exits 130)."""
    _stop_safely("recipe", lambda: run_recipe_command(config_path, sets, plugin_pairs, run_dir))


@train.command(name="report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="With several runs: the page to write (default: seeds_report.md beside the first run).")
def report(run_dirs: tuple[str, ...], out: str | None) -> None:
    """Write RUN_DIR/report.md (and each stage's curves.png) from the stages' metrics.jsonl:
    per-stage curves, RFT keep rate, value pretraining's explained variance, and with the kernel
    environment the pass and faster-than-torch.compile rates per stage.

    Several RUN_DIRs (one config, different seeds): one page with each seed's first -> last numbers,
    their mean ± standard deviation, and the mean curve with a min-max band."""
    try:
        if len(run_dirs) == 1 and out is None:
            from kag.plugins.algorithms.ppo.report import write_report

            click.echo(str(write_report(run_dirs[0])))
        else:
            from kag.plugins.algorithms.ppo.seeds_report import write_seeds_report

            click.echo(str(write_seeds_report(list(run_dirs), out)))
    except FileNotFoundError as exc:
        click.echo(f"kag: error: {exc}", err=True)
        raise SystemExit(2) from None
