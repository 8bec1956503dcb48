"""``kag data``: build an Ops-6K-style training set (crawl, compose, filter, decontaminate).

Every stage writes its file into ``--out`` and records counts, reasons and parameters in
``manifest.json``; ``kag data build`` runs them all and, rerun, resumes where it stopped.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

import click

from kag.cli.common import (make_executor, make_plugins, open_dataset, parse_key_values, plugin_options,
                            ray_address_option, user_errors)


def _data_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Pipeline input problems are user errors too: one line, exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from kag.core.data.synthesis import SynthesisError

        try:
            from kag.core.agent.policy import PolicyError
        except ImportError:  # pragma: no cover - policy core not present
            PolicyError = SynthesisError  # noqa: N806
        try:
            return fn(*args, **kwargs)
        except (SynthesisError, PolicyError) as exc:
            click.echo(f"kag: error: {exc}", err=True)
            raise SystemExit(2) from None

    return wrapper


def _folder(out: str, needs: str | None = None) -> tuple[Path, Any]:
    """OUT and its manifest; ``needs`` names the stage whose file this one reads, so a stage run in
    the wrong folder (or before its input exists) is a one-line error, not an empty result."""
    from kag.core.data import stages as st
    from kag.core.data.synthesis import Manifest, SynthesisError

    root = Path(out).expanduser()
    if needs is not None and not (root / st.FILES[needs]).exists():
        raise SynthesisError(f"{root / st.FILES[needs]} does not exist; run `kag data {needs} --out {out}` first "
                             f"(or `kag data build --out {out}` for every stage)")
    root.mkdir(parents=True, exist_ok=True)
    return root, Manifest(root / "manifest.json")


def _reference(plugins: Any, config: Any, against: str | None) -> list[tuple[str, str]] | None:
    if not against:
        return None
    loaded = open_dataset(plugins, config, against).load(execute=False)
    return [(t.name, t.code) for t in loaded.tasks]


common_out = click.option("--out", "out", required=True, type=click.Path(file_okay=False),
                          help="Output folder (stage files and manifest.json).")
decontam_option = click.option("--decontam", "decontam_name", default="decontam", show_default=True, metavar="NAME",
                               help="The decontamination filter plugin (`kag plugins`), made with --threshold and "
                                    "kag.toml's [filters.NAME].")
quiet_opt = click.option("--quiet", is_flag=True, help="No progress bar.")


def compose_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed([
        click.option("--n", "n", type=int, default=100, show_default=True, help="Tasks to compose."),
        click.option("--composer", default=None, help="Composer plugin (rule, llm); default: rule."),
        click.option("--mix", default=None, help="Bucket weights, e.g. torch#1=0.03,torch#2=0.75,transformers=0.08 "
                                                 "(default: the paper's mix)."),
        click.option("--profile", type=click.Choice(["auto", "cpu", "gpu"]), default="auto", show_default=True,
                     help="Input size profile (auto: gpu when torch sees CUDA)."),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--policy", default=None, help="Policy plugin of the llm composer (default: kag.toml's)."),
        click.option("--policy-option", "policy_opts", multiple=True, metavar="KEY=VALUE",
                     help="Option for the policy, e.g. path=answers.yaml (repeatable; VALUE as in kag.toml)."),
    ]):
        fn = opt(fn)
    return fn


def filter_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed([
        click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True),
        click.option("--workers", type=int, default=None, help="Worker processes (default: one per GPU / CPU core)."),
        click.option("--timeout", "timeout_s", type=float, default=180.0, show_default=True,
                     help="Seconds per task before its worker is killed."),
        click.option("--window-ms", default=None, metavar="LO,HI",
                     help="Eager time window in ms (default 1,100 on GPU, 0.1,100 on CPU)."),
        click.option("--compile-backend", default="inductor", show_default=True,
                     help="torch.compile backend the outputs are compared against."),
        click.option("--filter", "filter_name", default="exec", show_default=True, metavar="NAME",
                     help="The execution filter plugin (`kag plugins`); it is made with these options."),
        ray_address_option,
    ]):
        fn = opt(fn)
    return fn


def _composer_opts(plugins: Any, config: Any, composer: str, profile: str, policy: str | None,
                   policy_opts: tuple[str, ...]) -> dict:
    """kag.toml's ``[composers.NAME]`` options, under what the command line says (``--profile auto``:
    the table's profile if it has one, else the machine's)."""
    table = config.options("composers", composer)
    if profile == "auto":
        if "profile" in table:
            profile = table["profile"]
        else:
            import torch

            profile = "gpu" if torch.cuda.is_available() else "cpu"
    opts: dict[str, Any] = {**table, "profile": profile}
    if composer == "llm":
        opts.update(plugins=plugins, policy=policy,
                    policy_options=parse_key_values(policy_opts, "--policy-option", "model=my-model"))
    return opts


@click.group()
def data() -> None:
    """Build training tasks: crawl seed operators, compose, filter by execution, decontaminate."""


@data.command()
@common_out
@click.option("--crawler", "crawlers", multiple=True, help="Crawler plugin(s) (default: all: torch, transformers).")
@quiet_opt
@plugin_options
@user_errors
@_data_errors
def crawl(out: str, crawlers: tuple[str, ...], quiet: bool, plugin_pairs: tuple[str, ...], config_path: str | None) -> None:
    """Mine seed operators into OUT/seeds.jsonl and report found / instantiated / failed by reason."""
    from kag.core.data import stages as st

    plugins, config = make_plugins(plugin_pairs, config_path)
    root, manifest = _folder(out)
    names = list(crawlers) or list(plugins.selected_all("crawler"))
    with st.progress_bar(not quiet) as bar:
        seeds = st.crawl(plugins, root / st.FILES["crawl"], manifest, names, bar,
                         {n: config.options("crawlers", n) for n in names})
    for name, rep in manifest.stage("crawl").get("crawlers", {}).items():
        click.echo(f"{name}: found {rep['found']}, instantiated {rep['instantiated']}, failed {rep['failed']}, "
                   f"skipped {rep['skipped']}; failed: {rep['failed_reasons']}")
    click.echo(f"{len(seeds)} seeds in {root / st.FILES['crawl']}")


@data.command()
@common_out
@compose_options
@quiet_opt
@plugin_options
@user_errors
@_data_errors
def compose(out: str, n: int, composer: str | None, mix: str | None, profile: str, seed: int, policy: str | None,
            policy_opts: tuple[str, ...], quiet: bool, plugin_pairs: tuple[str, ...], config_path: str | None) -> None:
    """Stack OUT/seeds.jsonl operators into OUT/composed.jsonl (1-5 ops per task)."""
    from kag.core.data import stages as st
    from kag.core.data.synthesis import parse_mix

    plugins, config = make_plugins(plugin_pairs, config_path)
    root, manifest = _folder(out)
    name = composer or plugins.selected("composer")
    weights = parse_mix(mix)
    seeds = st.load_seeds(root / st.FILES["crawl"])
    with st.progress_bar(not quiet) as bar:
        recs = st.compose(plugins, seeds, root / st.FILES["compose"], manifest, name,
                          _composer_opts(plugins, config, name, profile, policy, policy_opts), n, weights, seed, bar)
    click.echo(f"{len(recs)} composed tasks in {root / st.FILES['compose']}; "
               f"failed attempts: {manifest.stage('compose').get('attempt_reasons')}")


@data.command(name="filter")
@common_out
@filter_options
@quiet_opt
@plugin_options
@user_errors
@_data_errors
def filter_cmd(out: str, device: str, workers: int | None, timeout_s: float, window_ms: str | None,
               compile_backend: str, filter_name: str, ray_address: str | None, quiet: bool, plugin_pairs: tuple[str, ...],
               config_path: str | None) -> None:
    """Run every OUT/composed.jsonl task; keep the usable ones in OUT/filtered.jsonl."""
    from kag.core.data import stages as st
    from kag.core.records import read_jsonl

    plugins, config = make_plugins(plugin_pairs, config_path)
    executor = make_executor(plugins, config, ray_address)
    root, manifest = _folder(out, needs="compose")
    cands = read_jsonl(root / st.FILES["compose"])
    opts = dict(device=device, workers=workers, timeout_s=timeout_s, window_ms=window_ms, compile_backend=compile_backend)
    with st.progress_bar(not quiet) as bar:
        kept = st.exec_filter(plugins, cands, root / st.FILES["filter"], manifest, opts, bar, executor, filter_name)
    s = manifest.stage("filter")
    click.echo(f"kept {len(kept)} of {len(cands)}; rejected: {s.get('reasons')}; "
               f"{s.get('throughput_tasks_per_min')} tasks/min")
    _unchecked(s)


def _unchecked(stage: dict[str, Any]) -> None:
    """Tasks whose job the executor lost: a one-line error (exit 1); the same command checks them."""
    if stage.get("unchecked"):
        click.echo(f"kag: error: {stage['unchecked']} tasks were not checked (the executor lost their jobs: "
                   f"{stage.get('executor')}); rerun the same command to check them", err=True)
        raise SystemExit(1)


@data.command()
@common_out
@click.option("--against", default=None, metavar="NAME:PATH", help="Benchmark to compare with, e.g. kernelbench:PATH.")
@click.option("--threshold", type=float, default=0.9, show_default=True,
              help="Drop tasks whose similarity (op graph, AST, or the same outputs: 1.0) is at or above this.")
@decontam_option
@quiet_opt
@plugin_options
@user_errors
@_data_errors
def decontam(out: str, against: str | None, threshold: float, decontam_name: str, quiet: bool,
             plugin_pairs: tuple[str, ...], config_path: str | None) -> None:
    """Drop OUT/filtered.jsonl tasks that compute what a benchmark task computes; write the histogram."""
    from kag.core.data import stages as st
    from kag.core.records import read_jsonl

    plugins, config = make_plugins(plugin_pairs, config_path)
    root, manifest = _folder(out, needs="filter")
    tasks = read_jsonl(root / st.FILES["filter"])
    with st.progress_bar(not quiet) as bar:
        kept = st.decontaminate(plugins, tasks, root / st.FILES["decontam"], manifest,
                                _reference(plugins, config, against), against, threshold, bar, decontam_name,
                                config.options("filters", decontam_name))
    st.write_output(kept, root / st.FILES["output"], manifest)
    click.echo(f"kept {len(kept)} of {len(tasks)}; {root / st.FILES['output']}, {root / 'decontam_hist.png'}")


@data.command()
@common_out
@click.option("--crawler", "crawlers", multiple=True, help="Crawler plugin(s) (default: all).")
@compose_options
@filter_options
@click.option("--against", default=None, metavar="NAME:PATH", help="Benchmark to decontaminate against.")
@click.option("--threshold", type=float, default=0.9, show_default=True)
@decontam_option
@quiet_opt
@plugin_options
@user_errors
@_data_errors
def build(out: str, crawlers: tuple[str, ...], n: int, composer: str | None, mix: str | None, profile: str,
          seed: int, policy: str | None, policy_opts: tuple[str, ...], device: str, workers: int | None,
          timeout_s: float, window_ms: str | None, compile_backend: str, filter_name: str, ray_address: str | None,
          against: str | None, threshold: float, decontam_name: str, quiet: bool, plugin_pairs: tuple[str, ...],
          config_path: str | None) -> None:
    """Run all stages into OUT (data.parquet + manifest.json); rerun to resume where it stopped."""
    from kag.core.data import stages as st
    from kag.core.data.synthesis import parse_mix

    plugins, config = make_plugins(plugin_pairs, config_path)
    executor = make_executor(plugins, config, ray_address)
    root, manifest = _folder(out)
    name = composer or plugins.selected("composer")
    reference = _reference(plugins, config, against)
    with st.progress_bar(not quiet) as bar:
        names = list(crawlers) or list(plugins.selected_all("crawler"))
        seeds = st.crawl(plugins, root / st.FILES["crawl"], manifest, names, bar,
                         {n: config.options("crawlers", n) for n in names})
        cands = st.compose(plugins, seeds, root / st.FILES["compose"], manifest, name,
                           _composer_opts(plugins, config, name, profile, policy, policy_opts), n, parse_mix(mix),
                           seed, bar)
        opts = dict(device=device, workers=workers, timeout_s=timeout_s, window_ms=window_ms,
                    compile_backend=compile_backend)
        kept = st.exec_filter(plugins, cands, root / st.FILES["filter"], manifest, opts, bar, executor, filter_name)
        _unchecked(manifest.stage("filter"))
        clean = st.decontaminate(plugins, kept, root / st.FILES["decontam"], manifest, reference, against,
                                 threshold, bar, decontam_name, config.options("filters", decontam_name))
    st.write_output(clean, root / st.FILES["output"], manifest)
    stages = manifest.data["stages"]
    click.echo(f"seeds {stages['crawl']['seeds']} -> composed {stages['compose']['composed']} -> "
               f"filtered {stages['filter']['kept']} ({stages['filter']['throughput_tasks_per_min']} tasks/min) -> "
               f"clean {stages['decontam']['kept']}; {root / st.FILES['output']}")
