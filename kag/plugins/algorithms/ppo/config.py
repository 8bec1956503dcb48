"""The train config: one TOML file can hold every stage.

``[train]`` sets shared values; ``[train.STAGE]`` (e.g. ``[train.warmup]``) overrides them for one
stage; ``[environments.NAME]`` holds the environment's options::

    [train]
    model = "tiny"
    environment = "copy-digit"
    actor_lr = 1e-3

    [train.warmup]
    output_dir = "runs/warmup"
    steps = 40

    [train.rft]
    init_from = "runs/warmup"
    data = "runs/collect/trajectories.jsonl"

With ``run_dir = "runs/NAME"`` in ``[train]`` the stages are wired for you: each writes to
``run_dir/STAGE`` and reads the earlier stages' outputs there (``STAGE_INPUTS``): the same file then
runs stage by stage (``kag train STAGE``) or all at once (``kag train recipe``). A key set in the
file still wins over the wiring.
"""

from __future__ import annotations

import math

from pathlib import Path
from typing import Any, Iterable

import attrs

LR_SCHEDULES = ("constant", "cosine")
DTYPES = ("float32", "bfloat16")  # the torch engine's weights
STAGES = ("warmup", "collect", "rft", "value-pretrain", "agentic")
TRAJECTORIES = "collect/trajectories.jsonl"  # under run_dir
# What each stage reads from the earlier ones under run_dir: key -> (stage that writes it, path).
# collect plays and RFT fine-tunes the warm-up actor; value pretraining fits the warm-up critic
# (tokenizer from the RFT actor); agentic PPO starts from the RFT actor and the pretrained critic.
STAGE_INPUTS: dict[str, dict[str, tuple[str, str]]] = {
    "warmup": {},
    "collect": {"init_from": ("warmup", "warmup")},
    "rft": {"init_from": ("warmup", "warmup"), "data": ("collect", TRAJECTORIES)},
    "value-pretrain": {"init_from": ("rft", "rft"), "critic_from": ("warmup", "warmup"),
                       "data": ("collect", TRAJECTORIES)},
    "agentic": {"init_from": ("rft", "rft"), "critic_from": ("value-pretrain", "value-pretrain")},
}


@attrs.define
class TrainConfig:
    stage: str = "warmup"
    # models and data
    model: str = "tiny"  # "tiny", a local directory or a Hugging Face id
    init_from: str | None = None  # actor to start from: a stage's output_dir or a model directory
    critic_from: str | None = None  # critic: a stage's output_dir, a saved critic, or a causal LM
    data: str | None = None  # trajectories JSONL: written by collect, read by rft / value-pretrain
    output_dir: str = "runs/train"  # train_config_from_dict: run_dir/STAGE, else runs/train/STAGE
    run_dir: str | None = None  # one directory for the whole recipe: wires the stages (STAGE_INPUTS)
    wired: dict[str, str] = attrs.field(factory=dict)  # key -> the stage whose output run_dir gave it
    environment: str = "copy-digit"
    env_options: dict[str, Any] = attrs.field(factory=dict)
    # engine
    seed: int = 0
    device: str = "cpu"  # "cpu", "cuda", or "auto"
    engine: str = "torch"  # "torch" or "deepspeed"
    zero_stage: int = 2
    bf16: bool = True  # DeepSpeed only
    dtype: str = "float32"  # torch engine: "bfloat16" loads actor, critic and reference in bf16 (fp32 master weights)
    logit_chunk_tokens: int = 2048  # positions whose logits exist at once in training forwards (0: all)
    gradient_checkpointing: bool = False  # recompute the actor's and critic's layers in backward (memory for time)
    rollout_engine: str = "hf"  # "hf" (the actor samples itself) or "vllm" (in-process engine, synced each step)
    vllm_options: dict[str, Any] = attrs.field(factory=dict)  # extra vllm.LLM(...) keywords, e.g. gpu_memory_utilization
    # schedule
    steps: int = 10
    episodes_per_step: int = 16
    mini_batch_size: int = 16  # episodes per optimiser step
    micro_batch_size: int = 8  # episodes per forward/backward
    micro_batch_tokens: int = 0  # > 0: a micro-batch holds as many episodes as fit this many tokens (padded; remove_padding: real)
    remove_padding: bool = False  # a micro-batch's episodes run packed in one row, no pad token through the model
    ppo_epochs: int = 1
    actor_lr: float = 1e-6
    critic_lr: float = 1e-5
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    lr_warmup_steps: int = 0  # stage steps over which the learning rates rise linearly from 0 (critic_warmup_steps count)
    lr_schedule: str = "constant"  # after the warm-up: "constant" or "cosine" (down to min_lr_ratio x lr at the last step)
    min_lr_ratio: float = 0.0
    deepspeed_config: dict[str, Any] = attrs.field(factory=dict)  # merged into the DeepSpeed config (e.g. offload)
    critic_warmup_steps: int = 0  # PPO steps that update only the critic
    # PPO
    gamma: float = 1.0
    lam: float = 0.95
    whiten_advantages: bool = True
    eps_low: float = 0.2
    eps_high: float = 0.28
    dual_clip_c: float | None = 3.0
    value_clip: float | None = 0.2
    loss_agg: str = "token-mean"
    entropy_coef: float = 0.0
    kl_coef: float = 0.0  # 0 = no reference policy; the starting value when kl_target is set
    kl_target: float | None = None  # adaptive KL: kl_coef follows the measured KL to this target (Ziegler et al. 2019)
    kl_horizon: int = 10000  # episodes over which the adaptive coefficient moves by at most 20% per target miss
    kl_mode: str = "loss"  # "loss" or "reward"
    kl_type: str = "low_var_kl"  # "k1", "k3"/"low_var_kl"
    use_tis: bool = True  # truncated IS against rollout log-probs, when present
    tis_cap: float = 2.0
    # rollouts
    executor: str = "local"  # executor plugin for the environments' evaluations: "local" (this machine), "ray"
    executor_options: dict[str, Any] = attrs.field(factory=dict)  # over [executors.NAME]: {address = "HOST:PORT", ...}
    env_workers: int = 1  # episodes whose turn is stepped at once (1: one after another; ray: its workers)
    max_turns: int = 1
    max_new_tokens: int = 64
    max_context: int = 4096
    temperature: float = 1.0
    num_episodes: int = 64  # collect
    # rft
    rft_epochs: int = 1
    rft_min_reward: float = 0.0
    rft_max_identical_repeats: int = 3
    rft_max_loop_period: int = 4
    rft_min_loop_repeats: int = 3
    rft_reject_invalid: bool = True
    # bookkeeping
    save_every: int = 10  # steps between checkpoints (0: only at the end; Ctrl-C always saves)
    resume: bool = True
    tensorboard: bool = True  # the tensorboard logger (when installed; a warning once when not)
    loggers: list[str] = attrs.field(factory=list)  # more logger plugins: "wandb", a third party's
    logger_options: dict[str, dict[str, Any]] = attrs.field(factory=dict)  # NAME -> options ([loggers.NAME])

    def validate(self, where: str = "train config") -> "TrainConfig":
        def bad(msg: str) -> ValueError:
            return ValueError(f"{where}: {msg}")

        if self.stage not in STAGES:
            raise bad(f"unknown stage {self.stage!r}; the stages are {', '.join(STAGES)}")
        if self.loss_agg not in ("token-mean", "seq-mean-token-mean"):
            raise bad(f"loss_agg must be token-mean or seq-mean-token-mean, got {self.loss_agg!r}")
        if self.kl_mode not in ("loss", "reward"):
            raise bad(f"kl_mode must be \"loss\" or \"reward\", got {self.kl_mode!r}")
        if self.engine not in ("torch", "deepspeed"):
            raise bad(f"engine must be \"torch\" or \"deepspeed\", got {self.engine!r}")
        if self.dtype not in DTYPES:
            raise bad(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.dtype != "float32" and self.engine != "torch":
            raise bad(f"dtype = {self.dtype!r} is the torch engine's; under engine = \"deepspeed\" set bf16 = true")
        if self.zero_stage not in (0, 1, 2, 3):
            raise bad(f"zero_stage must be 0, 1, 2 or 3, got {self.zero_stage!r}")
        if self.rollout_engine not in ("hf", "vllm"):
            raise bad(f"rollout_engine must be \"hf\" or \"vllm\", got {self.rollout_engine!r}")
        if self.kl_type not in ("k1", "k3", "low_var_kl"):
            raise bad(f"kl_type must be k1, k3 or low_var_kl, got {self.kl_type!r}")
        if self.stage in ("rft", "value-pretrain") and not self.data:
            raise bad(f"stage {self.stage} reads trajectories: set data = \"PATH.jsonl\" (written by collect)")
        if self.lr_schedule not in LR_SCHEDULES:
            raise bad(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}")
        if self.lr_warmup_steps < 0 or not 0.0 <= self.min_lr_ratio <= 1.0:
            raise bad(f"lr_warmup_steps must be >= 0 and min_lr_ratio in [0, 1], got {self.lr_warmup_steps}, "
                      f"{self.min_lr_ratio}")
        if self.kl_target is not None and (self.kl_target <= 0 or not self.kl_coef or self.kl_horizon < 1):
            raise bad("kl_target needs kl_target > 0, a starting kl_coef > 0 and kl_horizon >= 1")
        owned = {("zero_optimization", "stage"): "zero_stage", ("bf16",): "bf16",
                 ("train_micro_batch_size_per_gpu",): "micro_batch_size", ("gradient_accumulation_steps",): "mini_batch_size",
                 ("optimizer",): "actor_lr / critic_lr / weight_decay", ("gradient_clipping",): "grad_clip"}
        for path, key in owned.items():
            table: Any = self.deepspeed_config
            for part in path[:-1]:
                table = table.get(part, {}) if isinstance(table, dict) else {}
            if isinstance(table, dict) and path[-1] in table:
                raise bad(f"deepspeed_config sets {'.'.join(path)}, which kag derives from {key}: set that instead")
        if self.micro_batch_tokens < 0:
            raise bad(f"micro_batch_tokens must be >= 0 (0: micro_batch_size episodes a micro-batch), got "
                      f"{self.micro_batch_tokens}")
        if not isinstance(self.remove_padding, bool):
            raise bad(f"remove_padding must be true or false, got {self.remove_padding!r}")
        if self.logit_chunk_tokens < 0:
            raise bad(f"logit_chunk_tokens must be >= 0 (0: the whole logits at once), got {self.logit_chunk_tokens}")
        for name in ("steps", "episodes_per_step", "env_workers", "mini_batch_size", "micro_batch_size", "ppo_epochs", "max_turns"):
            if getattr(self, name) < 1:
                raise bad(f"{name} must be >= 1, got {getattr(self, name)}")
        return self


FIELDS = {f.name for f in attrs.fields(TrainConfig)}


def lr_factor(cfg: TrainConfig, step: int, total: int) -> float:
    """The learning rates' multiplier at stage step ``step`` (0-based) of ``total``: a linear
    warm-up over ``lr_warmup_steps``, then constant or a cosine to ``min_lr_ratio``. A pure
    function of the step, so a resumed run continues the same curve."""
    if step < cfg.lr_warmup_steps:
        return (step + 1) / (cfg.lr_warmup_steps + 1)
    if cfg.lr_schedule == "constant":
        return 1.0
    span = max(total - 1 - cfg.lr_warmup_steps, 1)
    progress = min(max(step - cfg.lr_warmup_steps, 0) / span, 1.0)
    return cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def adaptive_kl(coef: float, measured: float, target: float, episodes: int, horizon: int) -> float:
    """The next KL coefficient: up when the measured KL exceeds the target, down when below, by
    at most 20% x episodes / horizon per step (the adaptive controller of Ziegler et al. 2019)."""
    error = min(max(measured / target - 1.0, -0.2), 0.2)
    return coef * (1.0 + error * episodes / horizon)


def train_config_from_dict(stage: str, data: dict[str, Any], where: str = "train config",
                           algorithms: Iterable[str] = ()) -> TrainConfig:
    """Merge ``[train]`` and ``[train.STAGE]`` (and ``[environments.NAME]``) into a TrainConfig.
    ``algorithms``: the registered algorithms' names; their ``[train.NAME]`` tables are theirs (one
    config may drive PPO's stages and a plugin's algorithm), any other unknown table is an error."""
    train = dict(data.get("train", {}))
    per_stage = {k: train.pop(k) for k in list(train) if k in STAGES}
    for name in set(algorithms) - set(STAGES):
        if isinstance(train.get(name), dict):
            train.pop(name)
    merged = {**train, **per_stage.get(stage, {})}
    unknown = sorted(set(merged) - FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown [train] key(s) {', '.join(unknown)}; "
                         f"valid keys: {', '.join(sorted(FIELDS - {'stage'}))}")
    merged["stage"] = stage
    if "wired" in merged:
        raise ValueError(f"{where}: `wired` is set by run_dir, not in the file")
    merged.update(_wiring(stage, merged))
    env = merged.get("environment", attrs.fields(TrainConfig).environment.default)
    env_table = data.get("environments", {}).get(env, {})
    merged["env_options"] = {**env_table, **merged.get("env_options", {})}
    executor = merged.get("executor", attrs.fields(TrainConfig).executor.default)  # [executors.NAME], as kag eval reads it
    merged["executor_options"] = {**data.get("executors", {}).get(executor, {}), **merged.get("executor_options", {})}
    tables = data.get("loggers", {})  # [loggers.NAME]
    merged["logger_options"] = {name: {**tables.get(name, {}), **merged.get("logger_options", {}).get(name, {})}
                                for name in set(tables) | set(merged.get("logger_options", {}))}
    return TrainConfig(**merged).validate(where)


def _wiring(stage: str, merged: dict[str, Any]) -> dict[str, Any]:
    """output_dir (and with run_dir, the earlier stages' outputs) for keys the file leaves unset."""
    run_dir = merged.get("run_dir")
    out: dict[str, Any] = {}
    if "output_dir" not in merged:
        out["output_dir"] = str(Path(run_dir or "runs/train") / stage)  # a stage never shares a directory
    if run_dir:
        if "data" not in merged and stage == "collect":
            out["data"] = str(Path(run_dir) / TRAJECTORIES)
        wired = {key: source for key, (source, rel) in STAGE_INPUTS[stage].items() if key not in merged}
        out.update({key: str(Path(run_dir) / STAGE_INPUTS[stage][key][1]) for key in wired})
        out["wired"] = wired
    return out


def load_train_config(stage: str, path: str | Path) -> TrainConfig:
    from kag.plugin import load_config

    config = load_config(path)
    return train_config_from_dict(stage, config.data, where=str(path))
