"""Shared CLI pieces: plugin/config options and turning user errors into exit status 2."""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterable, Iterator

import click

from kag.core.agent.policy import PolicyError
from kag.core.config import Config, ConfigError, load_config, parse_value
from kag.core.eval.serve.server import ServerError
from kag.core.plugins import PluginError, Plugins, parse_plugin_options
from kag.core.records import JsonlError
from kag.core.tasks import TaskError

USER_ERRORS: tuple[type[Exception], ...] = (PluginError, ConfigError, TaskError, ServerError, JsonlError, PolicyError)


def plugin_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--plugin KIND=NAME`` (repeatable) and ``--config FILE`` to a command."""
    fn = click.option("--config", "config_path", type=click.Path(dir_okay=False),
                      help="kag.toml to read (default: ./kag.toml if present).")(fn)
    fn = click.option("--plugin", "plugin_pairs", multiple=True, metavar="KIND=NAME",
                      help="Choose a plugin by name, e.g. --plugin reward=milestone (repeatable).")(fn)
    return fn


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Report bad input as one clear line and exit 2, never as a traceback; Ctrl-C ends every
    process the command started and exits 130 (``interrupted``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as exc:
            click.echo(f"kag: error: {exc}", err=True)
            raise SystemExit(2) from None
        except KeyboardInterrupt:
            interrupted(f"kag {fn.__name__.rstrip('_')}: interrupted")

    return wrapper


def quiet_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--quiet", "-q", is_flag=True,
                        help="No progress on stderr (it is shown only when stderr is a terminal).")(fn)


@contextlib.contextmanager
def progress_status(quiet: bool, first: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr naming the phase a long command is in (``say(phase)`` moves it on); when
    stderr is not a terminal (a pipe, a log file, CI), one line per phase with the seconds so far,
    so a long run is never silent; nothing when ``quiet``."""
    import sys
    import time

    if quiet:
        yield lambda _phase: None
        return
    if not sys.stderr.isatty():
        start = time.monotonic()
        said = [first]
        print(f"{first} (0 s)", file=sys.stderr, flush=True)

        def line(phase: str) -> None:
            if phase != said[-1]:
                said.append(phase)
                print(f"{phase} ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)

        yield line
        return
    from rich.console import Console

    with Console(stderr=True).status(first) as status:
        yield lambda phase: status.update(phase)


def tools_line(tools: dict[str, int]) -> str:
    """"12 tool calls, 3 failed (2 timed out)": what the agent's commands met, whatever the verdict."""
    failed = f", {tools['errors']} failed" + (f" ({tools['timeouts']} timed out)" if tools["timeouts"] else "") \
        if tools["errors"] else ", none failed"
    return f"{tools['calls']} tool calls{failed}"


def stop_started_processes() -> None:
    """After a first Ctrl-C: a second one exits at once; every process this one started (judges,
    their candidates, sandboxed commands) is killed, so nothing of the run outlives it."""
    import os
    import signal
    import sys
    import time

    from kag.core.trust.process_tree import descendants

    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    if "kag.core.eval.orchestrator.judge_process" in sys.modules:  # an episode's thread must not start one as we go
        sys.modules["kag.core.eval.orchestrator.judge_process"].STOPPING.set()
    for sweep in range(2):  # twice: a thread still in an episode may have started one during the first
        for pid in reversed(descendants(os.getpid())):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if sweep == 0:
            time.sleep(0.2)


def interrupted(message: str) -> None:
    """End the command after Ctrl-C: processes stopped, their scratch folders removed (workspaces,
    bridges, build folders: kag.core.scratch), ``message`` said, exit status 130 (128 + SIGINT, as
    shells report it), without waiting for threads still in an episode."""
    import os
    import sys

    from kag.core import scratch

    stop_started_processes()
    scratch.remove_all()
    click.echo(message, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def make_plugins(plugin_pairs: tuple[str, ...], config_path: str | None) -> tuple[Plugins, Config]:
    """Load plugins and apply the selection: defaults < kag.toml [plugins] < --plugin."""
    config = load_config(config_path)
    from kag.core.hookspecs import KINDS

    config.check_sections(KINDS)
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


def parse_key_values(pairs: Iterable[str], option: str, example: str = "name=value") -> dict[str, Any]:
    """Repeated ``KEY=VALUE`` options (--policy-option, --set) -> dict, values read by ``parse_value``.

    The one parser, so the same VALUE means the same in every command; a malformed item is a usage
    error (exit 2) naming the option and showing the form, e.g. ``--set steps=5``."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE; write e.g. {option} {example}", param_hint=option)
        out[key.strip()] = parse_value(value)
    return out


def agent_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by ``kag run`` and ``kag eval``: policy, its options, budgets, backend."""
    options = [
        click.option("--policy", help="Policy plugin (default: the selected one, replay)."),
        click.option("--policy-option", "policy_pairs", multiple=True, metavar="KEY=VALUE",
                     help="Option for the policy, e.g. path=script.yaml, base_url=..., model=... "
                          "(repeatable; VALUE as in kag.toml)."),
        click.option("--backend", default="auto", show_default=True,
                     help="A backend plugin (`kag plugins`): cuda, cpu, nvrtc; auto: cuda when a GPU is visible, else cpu."),
        click.option("--max-turns", type=click.IntRange(1), default=200, show_default=True),
        click.option("--max-context-tokens", type=click.IntRange(1), default=128_000, show_default=True),
        click.option("--num-timed", type=click.IntRange(1), default=100, show_default=True,
                     help="Timed iterations per measurement."),
        click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
                     help="Folder for trajectories, results and summaries (a rerun resumes)."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return plugin_options(fn)


def make_agent_parts(plugins: Plugins, config: Config, policy: str | None, policy_pairs: tuple[str, ...],
                     backend: str, max_turns: int, max_context_tokens: int, num_timed: int) -> tuple[str, dict, Any]:
    """Resolve the policy name and options and the agent configuration (nothing is started)."""
    from kag.core.agent.loop import AgentConfig
    from kag.core.eval.orchestrator.evaluate import EvalOptions

    if policy:
        plugins.select({"policy": policy})
    name = plugins.selected("policy")
    opts = config.options("policies", name)
    opts.update(parse_key_values(policy_pairs, "--policy-option", "model=my-model"))
    from kag.core.eval.orchestrator.gpu_pool import pick_backend

    cfg = AgentConfig(max_turns=max_turns, max_context_tokens=max_context_tokens,
                      eval_options=EvalOptions(backend=pick_backend(backend), num_timed=num_timed))
    return name, opts, cfg


ray_address_option = click.option("--ray-address", metavar="HOST:PORT",
                                  help="The Ray cluster for --plugin executor=ray (default: RAY_ADDRESS, else a "
                                       "local cluster).")


def make_executor(plugins: Plugins, config: Config, ray_address: str | None) -> Any:
    """The selected executor, with its kag.toml options; --ray-address for the ray one."""
    name = plugins.selected("executor")
    opts = config.options("executors", name)
    if ray_address:
        if name != "ray":
            raise PluginError(f"--ray-address is for the ray executor; add --plugin executor=ray (selected: {name})")
        opts["address"] = ray_address
    return plugins.create("executor", name, **opts)
