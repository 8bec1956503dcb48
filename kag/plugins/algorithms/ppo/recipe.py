"""The paper's whole training recipe in one run directory: warm-up PPO -> collect -> RFT -> value
pretraining -> agentic PPO, each stage in ``run_dir/STAGE`` reading the earlier ones' outputs
(config.STAGE_INPUTS), then ``run_dir/report.md``.

``run_dir/recipe.json`` records the stages that finished (with their summaries): a rerun skips
those and resumes the stage it stopped in from that stage's own checkpoint, which no other stage
can resume (base.Stage refuses with the reason). Trusted side: it runs kag's own stages; episodes
are scored by the environments, which evaluate solutions only through the trusted evaluator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from kag.plugin import STOP, StopRequested
from kag.plugins.algorithms.ppo.config import STAGES, train_config_from_dict

STATE_FILE = "recipe.json"


def recipe_run_dir(data: dict[str, Any], where: str, run_dir: str | None) -> Path:
    """``--run-dir``, else ``[train] run_dir``; the recipe needs one (it is where it resumes from)."""
    chosen = run_dir or data.get("train", {}).get("run_dir")
    if not chosen:
        raise ValueError(f"{where}: the recipe needs a run directory: set run_dir = \"runs/NAME\" in [train] "
                         f"or pass --run-dir DIR")
    train = data.get("train", {})
    for name, table in [("train", train)] + [(f"train.{s}", train.get(s)) for s in STAGES]:
        if isinstance(table, dict) and "output_dir" in table:
            raise ValueError(f"{where}: [{name}] sets output_dir; the recipe puts every stage in run_dir/STAGE "
                             f"(remove output_dir, or run a stage alone with kag train STAGE)")
    return Path(chosen)


def load_state(run_dir: Path) -> dict[str, Any]:
    path = run_dir / STATE_FILE
    return json.loads(path.read_text()) if path.is_file() else {"finished": {}}


def _save_state(run_dir: Path, state: dict[str, Any]) -> None:
    tmp = run_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1, default=str))
    tmp.replace(run_dir / STATE_FILE)


def run_recipe(data: dict[str, Any], where: str, plugins: Any, echo: Callable[[str], None],
               run_dir: str | None = None) -> dict[str, Any]:
    """Run (or resume) every stage in order; returns {run_dir, stages: summaries, report}."""
    from kag.plugins.algorithms.ppo import ranks
    from kag.plugins.algorithms.ppo.report import write_report

    if ranks.world() > 1:  # collect, rft and value-pretrain run in one process
        raise ValueError(f"kag train recipe runs in one process, and this is one of {ranks.world()} ranks: run "
                         f"`kag train warmup` and `kag train agentic` under the launcher and the other stages "
                         f"without it (the same config and run_dir wire them)")
    out = recipe_run_dir(data, where, run_dir)
    data = {**data, "train": {**data.get("train", {}), "run_dir": str(out)}}
    algorithms = plugins.names("algorithm") if plugins is not None else ()
    configs = {stage: train_config_from_dict(stage, data, where=where, algorithms=algorithms)
               for stage in STAGES}  # all errors first
    out.mkdir(parents=True, exist_ok=True)
    state = load_state(out)
    if state.get("config") not in (None, data):
        echo(f"recipe: note: {where} differs from the config this run started with ({out / STATE_FILE}); "
             f"finished stages are kept, the rest run with the new one")
    state["config"] = data
    _save_state(out, state)
    for stage in STAGES:
        if stage in state["finished"]:
            echo(f"recipe: {stage}: finished earlier, skipped")
            continue
        cfg = configs[stage]
        ckpt = Path(cfg.output_dir) / "checkpoint" / "state.json"
        resumed = f", resuming at step {json.loads(ckpt.read_text())['step']}" if ckpt.is_file() and cfg.resume else ""
        echo(f"recipe: {stage} -> {cfg.output_dir}{resumed}")
        summary = plugins.create("algorithm", stage, config=cfg, plugins=plugins).run()
        state["finished"][stage] = summary
        _save_state(out, state)
        echo(f"recipe: {stage}: done ({_headline(summary)})")
        if STOP.is_set() and stage != STAGES[-1]:  # Ctrl-C in a stage's last step: stop between stages
            raise StopRequested(f"stopped after stage {stage}; the next run starts at "
                                f"{STAGES[STAGES.index(stage) + 1]}")
    report = write_report(out)
    echo(f"recipe: report {report}")
    return {"run_dir": str(out), "report": str(report), "stages": state["finished"]}


def _headline(summary: dict[str, Any]) -> str:
    keys = ("step", "episodes", "kept", "reward_mean", "explained_variance", "sft_loss")
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items() if k in keys)
