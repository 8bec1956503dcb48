"""What every stage shares: seeding, model loading, checkpoint/resume, metric logging.

A stage's output directory holds ``checkpoint/`` (``actor/`` and ``critic/`` via save_pretrained,
each with ``optimizer.pt``, plus ``state.json`` with the step) and ``metrics.jsonl`` (TensorBoard
events too when tensorboard is installed). A checkpoint is written to a temporary directory and
renamed, so a crash never leaves half a checkpoint; a rerun with the same config resumes from it.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import torch

from kag.plugin import append_jsonl, read_jsonl
from kag.plugins.algorithms.ppo import ranks
from kag.plugins.algorithms.ppo.config import TrainConfig, lr_factor
from kag.plugins.algorithms.ppo.engine import make_engine
from kag.plugins.algorithms.ppo.models import (critic_from_actor, enable_checkpointing, load_actor, load_critic,
                                               load_tokenizer)


# shown on a terminal after each step, in this order, when the stage logs them
PROGRESS_KEYS = ("reward_mean", "right_frac", "pass_frac", "loss", "sft_loss", "policy_loss", "value_loss",
                 "explained_variance", "entropy", "approx_kl", "kl_ref", "clip_frac", "kept_frac", "episodes",
                 "tokens_per_s", "step_s")
_SHORT = {"reward_mean": "reward", "explained_variance": "expl_var", "approx_kl": "kl", "clip_frac": "clip",
          "tokens_per_s": "tok/s", "value_loss": "v_loss", "policy_loss": "pi_loss"}
_warned_tensorboard = False


def progress_line(stage: str, step: int, total: int | None, metrics: dict[str, Any]) -> str:
    """``warmup 12/40 reward=0.41 kl=0.003 clip=0.12 tok/s=5210 ...``: one line per step."""
    shown = [f"{_SHORT.get(k, k)}={metrics[k]:.4g}" for k in PROGRESS_KEYS
             if isinstance(metrics.get(k), (int, float)) and not isinstance(metrics.get(k), bool)]
    return f"{stage} {step}/{total if total else '?'} {' '.join(shown)}"


OFF_TERMINAL_EVERY_S = 30.0


class MetricLogger:
    """metrics.jsonl (the record every report and plot reads), a line per step on a terminal (off
    one, a log or CI: the first and last steps and one every ``OFF_TERMINAL_EVERY_S``), the chosen
    ``logger`` plugins (TensorBoard by default when installed, ``kag[train]``; wandb; a third
    party's), and ``curves.png`` when the stage ends."""

    def __init__(self, out_dir: Path, stage: str, tensorboard: bool = True, total: int | None = None,
                 seed: int | None = None, loggers: list[str] | None = None, plugins: Any = None,
                 logger_options: dict[str, dict[str, Any]] | None = None, config: dict[str, Any] | None = None):
        self.path = out_dir / "metrics.jsonl"
        self.stage = stage
        self.total = total
        self.seed = seed  # in every row: a report over several runs says which seed each one was
        self.last_line = -math.inf  # when the last progress line went to a log
        self.sinks: list[Any] = []
        self._sink_args = (out_dir, stage, tensorboard, loggers or [], plugins, logger_options or {}, config)

    def start(self) -> None:
        """Refuse another stage's metrics file, then open the logger plugins' sinks."""
        self.check_owner()
        self.sinks = make_sinks(*self._sink_args)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        append_jsonl(self.path, {"stage": self.stage, "step": step, "time": time.time(), "seed": self.seed, **clean})
        now = time.monotonic()
        if sys.stderr.isatty() or now - self.last_line >= OFF_TERMINAL_EVERY_S or step == self.total:
            self.last_line = now  # a person at a terminal sees each step, a log a line every 30 s
            sys.stderr.write(progress_line(self.stage, step, self.total, clean) + "\n")
            sys.stderr.flush()
        numbers = {k: v for k, v in clean.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        for sink in self.sinks:
            sink.log(step, numbers)

    def close_sinks(self) -> None:
        """Flush and release every sink (safe to call twice: a stage's end, then its ``finally``)."""
        sinks, self.sinks = self.sinks, []
        for sink in sinks:
            sink.close()

    def check_owner(self) -> None:
        """Refuse to append to another stage's metrics (two stages given one output_dir)."""
        others = {r.get("stage") for r in read_jsonl(self.path)} - {self.stage} if self.path.is_file() else set()
        if others:
            raise ValueError(f"{self.path} holds stage {', '.join(sorted(map(str, others)))}'s metrics, not "
                             f"{self.stage}'s: give {self.stage} its own output_dir (or set run_dir)")

    def truncate(self, step: int) -> None:
        """Drop rows after ``step`` (logged after the checkpoint a resumed run starts from)."""
        if not self.path.is_file():
            return
        rows = [r for r in read_jsonl(self.path) if r.get("step", 0) <= step]
        self.path.unlink()
        append_jsonl(self.path, *rows)

    def close(self) -> None:
        self.close_sinks()
        from kag.plugins.algorithms.ppo.report import plot_stage

        plot_stage(self.path.parent, self.stage)


class RankLogger(MetricLogger):
    """The logger of ranks other than 0 under a launcher: rank 0 writes the step's row (kag.plugins.
    algorithms.ppo.ranks), these write nothing."""

    def __init__(self, out_dir: Path, stage: str, total: int | None = None):
        super().__init__(out_dir, stage, tensorboard=False, total=total, loggers=[])

    def log(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def check_owner(self) -> None:
        pass

    def truncate(self, step: int) -> None:
        pass

    def close(self) -> None:
        pass


def make_sinks(out_dir: Path, stage: str, tensorboard: bool, loggers: list[str], plugins: Any,
               options: dict[str, dict[str, Any]], config: dict[str, Any] | None) -> list[Any]:
    """The logger plugins' sinks: the chosen ``loggers`` (checked before any model loaded, by
    ``Stage._check_loggers``) and the default tensorboard, skipped with a warning once when not installed."""
    global _warned_tensorboard
    from kag.plugin import Plugins

    names = list(dict.fromkeys(loggers + (["tensorboard"] if tensorboard else [])))
    if not names:
        return []
    plugins = plugins or Plugins()
    sinks = []
    for name in names:
        if name not in loggers:  # the default tensorboard: skipped, with a warning once, when not installed
            reason = plugins.entry("logger", name).availability()  # (chosen ones: Stage._check_loggers)
            if reason:
                if not _warned_tensorboard:
                    sys.stderr.write(f"kag train: {reason}; metrics go to metrics.jsonl and curves.png only "
                                     f"(tensorboard = false hides this)\n")
                    _warned_tensorboard = True
                continue
        sinks.append(plugins.create("logger", name, out_dir=out_dir, stage=stage, config=config or {},
                                    **options.get(name, {})))
    return sinks


def resolve_model_dir(path: str, role: str) -> Path:
    """A stage's output_dir (its checkpoint/ROLE) or a model directory itself."""
    p = Path(path)
    if (p / "checkpoint" / role).is_dir():
        return p / "checkpoint" / role
    if p.is_dir():
        return p
    raise FileNotFoundError(f"{role} {path!r} not found: point it at an earlier stage's output_dir "
                            f"(with checkpoint/{role}/) or a saved model directory")


class Stage:
    """Base of the algorithm plugins; subclasses set the flags and implement ``run``."""

    name = "stage"
    needs_actor = True
    needs_critic = False
    trains_actor = False
    splits_over_ranks = False  # True: runs data-parallel under a launcher (kag.plugins.algorithms.ppo.ranks)

    def __init__(self, config: TrainConfig, plugins: Any | None = None):
        self.config = config
        self.plugins = plugins
        self.out = Path(config.output_dir)
        self.ckpt = self.out / "checkpoint"
        self.step = 0
        self.kl_coef = config.kl_coef  # moves with the measured KL when kl_target is set; saved in state.json
        self.finished = False  # saved in state.json: a later stage refuses to read an unfinished one
        self.device = torch.device("cuda" if config.device == "auto" and torch.cuda.is_available()
                                   else ("cpu" if config.device == "auto" else config.device))
        if self.device.type == "cuda" and self.device.index is None and ranks.world() > 1:
            self.device = torch.device("cuda", ranks.local_rank())  # one GPU per rank
            torch.cuda.set_device(self.device)
        self.actor = self.tokenizer = self.critic = None
        self.actor_engine = self.critic_engine = None
        self._evaluations: Any = None  # kag.core.eval.serve.remote.ExecutorEvaluations, while the stage holds workers

    # -- setup -------------------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.config
        self._check_ranks()
        self._check_loggers()
        self.out.mkdir(parents=True, exist_ok=True)
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.rng = random.Random(cfg.seed)  # the same on every rank: every rank draws the same tasks
        self.generator = torch.Generator().manual_seed(cfg.seed + 7919 * ranks.rank())  # sampling: per rank
        self._check_inputs()
        old = self.out / "checkpoint.old"
        if ranks.is_main() and not self.ckpt.exists() and old.is_dir():  # killed between save_checkpoint's renames
            old.rename(self.ckpt)
        ranks.barrier()
        resuming = cfg.resume and (self.ckpt / "state.json").is_file()
        if resuming:
            state = json.loads((self.ckpt / "state.json").read_text())
            if state.get("stage") != self.name:
                raise ValueError(f"{self.ckpt} is stage {state.get('stage')}'s checkpoint (step {state.get('step')}), "
                                 f"not {self.name}'s: a stage never resumes another's; give {self.name} its own "
                                 f"output_dir (or set run_dir)")
            self.step = int(state["step"])
            if cfg.kl_target is not None:  # adaptive: continue where it was; fixed: the file's value
                self.kl_coef = float(state.get("kl_coef", cfg.kl_coef))
            self.rng.setstate(_tuplify(state["python_rng"]))
            generators = state.get("torch_generators") or [state["torch_generator"]]
            if len(generators) != ranks.world():
                raise ValueError(f"{self.ckpt} was written by {len(generators)} rank(s); resume it with as many "
                                 f"(this run has {ranks.world()}), or start afresh with resume = false")
            self.generator.set_state(torch.tensor(generators[ranks.rank()], dtype=torch.uint8))
        elif cfg.resume is False and self.ckpt.exists() and ranks.is_main():
            shutil.rmtree(self.ckpt)
        ranks.barrier()
        if self.needs_actor:
            if resuming and (self.ckpt / "actor").is_dir():
                self.actor, self.tokenizer = load_actor(str(self.ckpt / "actor"))
            elif cfg.init_from:
                self.actor, self.tokenizer = load_actor(str(resolve_model_dir(cfg.init_from, "actor")))
            else:
                if self.name != "warmup":  # said, not silent: later stages normally start from a trained actor
                    sys.stderr.write(f"kag train {self.name}: no init_from (nor run_dir): the actor is "
                                     f"{cfg.model!r} as it is, not an earlier stage's\n")
                self.actor, self.tokenizer = load_actor(cfg.model, seed=cfg.seed)
            self.actor.to(self.device, dtype=self.weight_dtype)
        if self.needs_critic:
            if resuming and (self.ckpt / "critic").is_dir():
                self.critic = load_critic(self.ckpt / "critic")
            elif cfg.critic_from:
                self.critic = load_critic(resolve_model_dir(cfg.critic_from, "critic"))
            else:
                self.critic = critic_from_actor(self._actor_for_critic())
            self.critic.to(self.device, dtype=self.weight_dtype)
            if self.tokenizer is None:
                self.tokenizer = load_tokenizer(self._tokenizer_source(resuming))
        if cfg.gradient_checkpointing:
            for model in (self.actor if self.trains_actor else None, getattr(self.critic, "backbone", None)):
                if model is not None:
                    enable_checkpointing(model)
        if self.trains_actor:
            self.actor_engine = make_engine(cfg.engine, self.actor, cfg.actor_lr, cfg.weight_decay, cfg.grad_clip,
                                            cfg.zero_stage, cfg.bf16, **self._batch_shape(),
                                            extra_config=cfg.deepspeed_config)
            self.actor = self.actor_engine.module
            if resuming:
                self.actor_engine.load_optimizer(self.ckpt / "actor")
        if self.needs_critic:
            self.critic_engine = make_engine(cfg.engine, self.critic, cfg.critic_lr, cfg.weight_decay,
                                             cfg.grad_clip, cfg.zero_stage, cfg.bf16, **self._batch_shape(),
                                             extra_config=cfg.deepspeed_config)
            self.critic = self.critic_engine.module
            if resuming:
                self.critic_engine.load_optimizer(self.ckpt / "critic")
        self.logger = (MetricLogger(self.out, self.name, cfg.tensorboard, total=self.total_steps(), seed=cfg.seed,
                                    loggers=cfg.loggers, plugins=self.plugins, logger_options=cfg.logger_options,
                                    config=attrs.asdict(cfg)) if ranks.is_main()
                       else RankLogger(self.out, self.name, total=self.total_steps()))
        self.logger.start()
        self.logger.truncate(self.step if resuming else 0)

    def total_steps(self) -> int | None:
        """Steps the stage will run (for the progress line); None when only the data says."""
        return self.config.steps

    def _check_ranks(self) -> None:
        """Under a launcher with several ranks: only stages that split their work over ranks, and
        only on an engine that averages gradients across them."""
        cfg, n = self.config, ranks.world()
        if n <= 1:
            return
        if not self.splits_over_ranks:
            raise ValueError(f"kag train {self.name} runs in one process, and this is one of {n} ranks: start it "
                             f"without the deepspeed/torchrun launcher (warmup and agentic split over ranks)")
        if cfg.engine != "deepspeed":
            raise ValueError(f"kag train {self.name} on {n} ranks needs engine = \"deepspeed\" (it averages the "
                             f"gradients across ranks); engine = {cfg.engine!r} trains each rank alone")
        if cfg.rollout_engine != "hf":
            raise ValueError(f"kag train {self.name} on {n} ranks samples with the actor itself: set "
                             f"rollout_engine = \"hf\" (a vLLM engine per rank is not supported)")
        ranks.check_sizes(cfg.episodes_per_step, cfg.mini_batch_size, f"kag train {self.name} on {n} ranks")
        ranks.init()  # before the first barrier (a resume every rank must agree on)

    def _check_inputs(self) -> None:
        """Inputs wired from run_dir must be there: say which stage to run first, never start fresh."""
        cfg = self.config
        for key, source in cfg.wired.items():
            path = Path(getattr(cfg, key))
            role = "critic" if key == "critic_from" else "actor"
            ready = path.is_file() if key == "data" else (path / "checkpoint" / role).is_dir()
            if not ready:
                raise ValueError(f"stage {self.name} reads {source}'s output ({path}{'' if key == 'data' else '/checkpoint/' + role}), "
                                 f"which is not there yet: run `kag train {source}` with this config first, "
                                 f"or `kag train recipe` for every stage in order")
            state_file = Path(cfg.run_dir or ".") / source / "checkpoint" / "state.json"
            state = json.loads(state_file.read_text()) if state_file.is_file() else {}
            if state.get("finished") is False:
                raise ValueError(f"stage {self.name} reads {source}'s output, but {source} stopped at step "
                                 f"{state.get('step')} before it finished: rerun `kag train {source}` with this "
                                 f"config first (it resumes), or `kag train recipe`")

    @property
    def weight_dtype(self) -> torch.dtype:
        """The models' weights' dtype (``dtype``; the torch engine's: DeepSpeed casts its own under bf16)."""
        return getattr(torch, self.config.dtype)

    def _batch_shape(self) -> dict[str, int]:
        """Micro-batch size and micro-batches per optimiser step (DeepSpeed's batch config)."""
        mini = self.local_mini_batch()
        micro = min(self.config.micro_batch_size, mini)
        return {"micro_batch_size": micro, "accumulation_steps": -(-mini // micro)}

    @property
    def split(self) -> bool:
        """Whether this rank holds a share of each step (a splitting stage among several ranks)."""
        return self.splits_over_ranks and ranks.world() > 1

    def local_mini_batch(self) -> int:
        """Episodes of one optimiser step this rank trains on (``mini_batch_size`` split over ranks)."""
        return max(1, self.config.mini_batch_size // ranks.world()) if self.split else self.config.mini_batch_size

    def _tokenizer_source(self, resuming: bool) -> str:
        cfg = self.config
        if resuming and (self.ckpt / "critic" / "tokenizer_config.json").is_file():
            return str(self.ckpt / "critic")
        for source in (cfg.critic_from, cfg.init_from):
            if source:
                role = "critic" if source == cfg.critic_from else "actor"
                path = resolve_model_dir(source, role)
                if (path / "tokenizer_config.json").is_file():
                    return str(path)
        return cfg.model

    def _actor_for_critic(self) -> Any:
        if self.actor is not None:
            return self.actor
        source = self.config.init_from
        model, self.tokenizer = load_actor(str(resolve_model_dir(source, "actor")) if source else self.config.model,
                                           seed=self.config.seed)
        return model

    def make_envs(self, n: int) -> list[Any]:
        from kag.plugin import Plugins

        import inspect

        plugins = self.plugins or Plugins()
        factory = plugins.entry("environment", self.config.environment).factory
        options = dict(self.config.env_options)
        try:  # environments that evaluate (kernel-*) get the run's plugin choices (reward, guards) and
            params = inspect.signature(factory).parameters  # the executor's workers when one is chosen
        except (TypeError, ValueError):
            params = {}
        if "plugins" in params:
            options.setdefault("plugins", plugins)
        if "pool" in params and self.config.executor != "local":
            options.setdefault("pool", self.evaluations(plugins))
        return [factory(**options) for _ in range(n)]

    def evaluations(self, plugins: Any) -> Any:
        """The executor's workers, held for the stage's evaluations until ``close_evaluations``."""
        from kag.plugin import ExecutorEvaluations

        if self._evaluations is None:
            cfg = self.config
            executor = plugins.create("executor", cfg.executor, **cfg.executor_options)
            from kag.plugin import pick_backend

            gpu = pick_backend(str(cfg.env_options.get("backend", "auto"))) != "cpu"  # as the environment picks
            self._evaluations = ExecutorEvaluations(executor.session(cfg.env_workers, gpu=gpu), plugins)
        return self._evaluations

    @property
    def actor_forward(self) -> Any:
        """The actor as training forwards call it: through its engine (kag.plugins.algorithms.ppo.engine)."""
        return self.actor_engine.forward_model if self.actor_engine is not None else self.actor

    @property
    def critic_forward(self) -> Any:
        return self.critic_engine.forward_model if self.critic_engine is not None else self.critic

    def _check_loggers(self) -> None:
        """An unknown or uninstalled logger is a one-line error before any model loads."""
        if not self.config.loggers or not ranks.is_main():
            return
        from kag.plugin import Plugins

        plugins = self.plugins or Plugins()
        for name in self.config.loggers:
            reason = plugins.entry("logger", name).availability()  # unknown: PluginError naming the known ones
            if reason:
                raise ValueError(f"loggers: {reason}")

    def apply_lr_schedule(self, total: int) -> float:
        """Set this step's learning rates on every engine (kag.plugins.algorithms.ppo.config.lr_factor)."""
        factor = lr_factor(self.config, self.step, total)
        for engine in (self.actor_engine, self.critic_engine):
            if engine is not None:
                engine.set_lr_factor(factor)
        return factor

    def close_evaluations(self) -> None:
        evaluations, self._evaluations = self._evaluations, None
        if evaluations is not None:
            evaluations.close()

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Every rank writes its DeepSpeed shard; rank 0 the rest, then renames the folder into place."""
        tmp = self.out / "checkpoint.tmp"
        main = ranks.is_main()
        if main:
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
            for role, present in (("actor", self.actor is not None), ("critic", self.critic_engine is not None)):
                if present:
                    (tmp / role).mkdir()
        ranks.barrier()
        if self.actor is not None:
            if self.actor_engine is not None:
                self.actor_engine.save(tmp / "actor", self.tokenizer)
            elif main:
                self.actor.save_pretrained(tmp / "actor")
                self.tokenizer.save_pretrained(tmp / "actor")
        if self.critic_engine is not None:
            self.critic_engine.save(tmp / "critic", self.tokenizer)
        generators = ranks.gather(self.generator.get_state().tolist())
        ranks.barrier()
        if main:
            state = {"step": self.step, "stage": self.name, "finished": self.finished, "kl_coef": self.kl_coef,
                     "python_rng": self.rng.getstate(), "torch_generator": generators[0]}
            if len(generators) > 1:
                state["torch_generators"] = generators
            (tmp / "state.json").write_text(json.dumps(state))
            old = self.out / "checkpoint.old"
            if self.ckpt.exists():
                self.ckpt.rename(old)
            tmp.rename(self.ckpt)
            if old.exists():
                shutil.rmtree(old)
        ranks.barrier()
        return self.ckpt

    def maybe_checkpoint(self, last: bool) -> None:
        """After each step: checkpoint when due, and when a Ctrl-C asked the run to stop (kag.core.
        interrupt), checkpoint and stop here, between steps, where a rerun resumes cleanly."""
        from kag.plugin import STOP, StopRequested

        every = self.config.save_every
        self.finished = last
        stop = ranks.any_rank(STOP.is_set()) if self.split else STOP.is_set()
        if last or stop or (every and self.step % every == 0):
            self.save_checkpoint()
        if stop and not last:
            raise StopRequested(f"stopped after step {self.step}; checkpoint at {self.ckpt}")

    def run(self) -> dict[str, Any]:
        """The stage's work (``_run``); the executor's workers, if it held any, are let go however it ends."""
        try:
            summary = self._run()
        finally:
            self.close_evaluations()
            logger = getattr(self, "logger", None)
            if logger is not None:  # trackers flushed also after Ctrl-C or an error (wandb's run finished)
                logger.close_sinks()
        ranks.finish()
        return summary

    def _run(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


def _tuplify(x: Any) -> Any:
    return tuple(_tuplify(i) for i in x) if isinstance(x, list) else x
