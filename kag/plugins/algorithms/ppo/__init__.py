"""PPO with a critic and the paper's staged start, as ``algorithm`` plugins.

Stages (run with ``kag train STAGE --config FILE``): ``warmup`` (single-turn PPO), ``collect``
(trajectories from the actor), ``rft`` (rejection fine-tuning), ``value-pretrain`` (critic on GAE
targets), ``agentic`` (multi-turn PPO; also registered as ``ppo``). Each factory takes a
``TrainConfig`` (and optionally the ``Plugins`` to find the environment in) and has ``run()``.
Heavy modules (torch, transformers) load only when a stage is created.
"""

from __future__ import annotations

from typing import Any

from kag.plugin import hookimpl


def _lazy(module: str, attr: str, doc: str) -> Any:
    def factory(config: Any = None, plugins: Any | None = None, *, config_data: dict | None = None,
                stage: str | None = None, where: str = "config") -> Any:
        """``config`` (a TrainConfig), or ``config_data`` (the TOML tables) to build it from."""
        import importlib

        if config is None:
            from kag.plugins.algorithms.ppo.config import train_config_from_dict

            config = train_config_from_dict(stage or attr, config_data or {}, where=where,
                                            algorithms=plugins.names("algorithm") if plugins is not None else ())
        return getattr(importlib.import_module(f"kag.plugins.algorithms.ppo.{module}"), attr)(config, plugins)

    def check_available() -> str | None:  # every stage builds Hugging Face models
        from kag.plugin import missing

        return missing("transformers", f"the {attr} stage")

    factory.__doc__ = doc
    factory.__name__ = attr
    factory.check_available = check_available  # type: ignore[attr-defined]
    return factory


STAGE_FACTORIES: dict[str, Any] = {
    "warmup": _lazy("ppo_stage", "WarmupPPO", "Single-turn PPO: one response per prompt, reward from the environment."),
    "collect": _lazy("stages", "Collect", "Play episodes with the actor and write trajectories (JSONL)."),
    "rft": _lazy("stages", "RejectionFineTune", "Fine-tune the actor on kept trajectories' model tokens."),
    "value-pretrain": _lazy("stages", "ValuePretrain", "Fit the critic to GAE targets on collected trajectories."),
    "agentic": _lazy("ppo_stage", "AgenticPPO", "Multi-turn PPO from the RFT actor and pretrained critic."),
}


@hookimpl
def kag_register_algorithms(register) -> None:
    for name, factory in STAGE_FACTORIES.items():
        register(name, factory)
    register("ppo", STAGE_FACTORIES["agentic"])
