"""Shared CLI pieces: plugin/config options and turning user errors into exit status 2."""

from __future__ import annotations

import functools
from typing import Any, Callable

import click

from kag.core.config import Config, ConfigError, load_config
from kag.core.plugins import PluginError, Plugins, parse_plugin_options
from kag.core.tasks import TaskError

USER_ERRORS = (PluginError, ConfigError, TaskError)


def plugin_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--plugin KIND=NAME`` (repeatable) and ``--config FILE`` to a command."""
    fn = click.option("--config", "config_path", type=click.Path(dir_okay=False),
                      help="kag.toml to read (default: ./kag.toml if present).")(fn)
    fn = click.option("--plugin", "plugin_pairs", multiple=True, metavar="KIND=NAME",
                      help="Choose a plugin by name, e.g. --plugin reward=milestone (repeatable).")(fn)
    return fn


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Report bad input as one clear line and exit 2, never as a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as exc:
            click.echo(f"kag: error: {exc}", err=True)
            raise SystemExit(2) from None

    return wrapper


def make_plugins(plugin_pairs: tuple[str, ...], config_path: str | None) -> tuple[Plugins, Config]:
    """Load plugins and apply the selection: defaults < kag.toml [plugins] < --plugin."""
    config = load_config(config_path)
    plugins = Plugins()
    plugins.select(config.plugins)
    plugins.select(parse_plugin_options(plugin_pairs))
    return plugins, config


def open_dataset(plugins: Plugins, config: Config, spec: str, **options: Any) -> Any:
    """``NAME[:PATH]`` -> a dataset plugin instance, with kag.toml options as defaults."""
    from kag.core.tasks import parse_dataset_spec

    name, path = parse_dataset_spec(spec)
    opts = config.options("datasets", name)
    if path:
        opts["path"] = path
    opts.update({k: v for k, v in options.items() if v is not None})
    return plugins.create("dataset", name, **opts)
