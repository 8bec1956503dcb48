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

import torch

from kag.core.records import append_jsonl, read_jsonl
from kag.plugins.algorithms.ppo.config import TrainConfig
from kag.plugins.algorithms.ppo.engine import make_engine
from kag.plugins.algorithms.ppo.models import critic_from_actor, load_actor, load_critic, load_tokenizer


PROGRESS_KEYS = ("reward_mean", "loss", "policy_loss", "value_loss", "entropy", "approx_kl", "episodes",
                 "kept_frac", "step_s")


class MetricLogger:
    def __init__(self, out_dir: Path, stage: str, tensorboard: bool = True):
        self.path = out_dir / "metrics.jsonl"
        self.stage = stage
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(out_dir / "tensorboard"))
            except ImportError:
                self.writer = None

    def log(self, step: int, metrics: dict[str, float]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        append_jsonl(self.path, {"stage": self.stage, "step": step, "time": time.time(), **clean})
        if sys.stderr.isatty():  # a person at a terminal sees each step; logs and pipes get metrics.jsonl
            shown = [f"{k}={v:.4g}" for k, v in clean.items() if k in PROGRESS_KEYS and isinstance(v, (int, float))]
            sys.stderr.write(f"{self.stage} step {step}: {' '.join(shown)}\n")
        if self.writer is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(v):
                    self.writer.add_scalar(f"{self.stage}/{k}", v, step)
            self.writer.flush()

    def truncate(self, step: int) -> None:
        """Drop rows after ``step`` (logged after the checkpoint a resumed run starts from)."""
        if not self.path.is_file():
            return
        rows = [r for r in read_jsonl(self.path) if r.get("step", 0) <= step]
        self.path.unlink()
        append_jsonl(self.path, *rows)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


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

    def __init__(self, config: TrainConfig, plugins: Any | None = None):
        self.config = config
        self.plugins = plugins
        self.out = Path(config.output_dir)
        self.ckpt = self.out / "checkpoint"
        self.step = 0
        self.device = torch.device("cuda" if config.device == "auto" and torch.cuda.is_available()
                                   else ("cpu" if config.device == "auto" else config.device))
        self.actor = self.tokenizer = self.critic = None
        self.actor_engine = self.critic_engine = None

    # -- setup -------------------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.rng = random.Random(cfg.seed)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        resuming = cfg.resume and (self.ckpt / "state.json").is_file()
        if resuming:
            state = json.loads((self.ckpt / "state.json").read_text())
            self.step = int(state["step"])
            self.rng.setstate(_tuplify(state["python_rng"]))
            self.generator.set_state(torch.tensor(state["torch_generator"], dtype=torch.uint8))
        elif cfg.resume is False and self.ckpt.exists():
            shutil.rmtree(self.ckpt)
        if self.needs_actor:
            if resuming and (self.ckpt / "actor").is_dir():
                self.actor, self.tokenizer = load_actor(str(self.ckpt / "actor"))
            elif cfg.init_from:
                self.actor, self.tokenizer = load_actor(str(resolve_model_dir(cfg.init_from, "actor")))
            else:
                self.actor, self.tokenizer = load_actor(cfg.model, seed=cfg.seed)
            self.actor.to(self.device)
        if self.needs_critic:
            if resuming and (self.ckpt / "critic").is_dir():
                self.critic = load_critic(self.ckpt / "critic")
            elif cfg.critic_from:
                self.critic = load_critic(resolve_model_dir(cfg.critic_from, "critic"))
            else:
                self.critic = critic_from_actor(self._actor_for_critic())
            self.critic.to(self.device)
            if self.tokenizer is None:
                self.tokenizer = load_tokenizer(self._tokenizer_source(resuming))
        if self.trains_actor:
            self.actor_engine = make_engine(cfg.engine, self.actor, cfg.actor_lr, cfg.weight_decay, cfg.grad_clip,
                                            cfg.zero_stage, cfg.bf16, **self._batch_shape())
            self.actor = self.actor_engine.module
            if resuming:
                self.actor_engine.load_optimizer(self.ckpt / "actor")
        if self.needs_critic:
            self.critic_engine = make_engine(cfg.engine, self.critic, cfg.critic_lr, cfg.weight_decay,
                                             cfg.grad_clip, cfg.zero_stage, cfg.bf16, **self._batch_shape())
            self.critic = self.critic_engine.module
            if resuming:
                self.critic_engine.load_optimizer(self.ckpt / "critic")
        self.logger = MetricLogger(self.out, self.name, cfg.tensorboard)
        self.logger.truncate(self.step if resuming else 0)

    def _batch_shape(self) -> dict[str, int]:
        """Micro-batch size and micro-batches per optimiser step (DeepSpeed's batch config)."""
        cfg = self.config
        micro = min(cfg.micro_batch_size, cfg.mini_batch_size)
        return {"micro_batch_size": micro, "accumulation_steps": -(-cfg.mini_batch_size // micro)}

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
        from kag.core.plugins import Plugins

        import inspect

        plugins = self.plugins or Plugins()
        factory = plugins.entry("environment", self.config.environment).factory
        options = dict(self.config.env_options)
        try:  # environments that evaluate (kernel-*) get the run's plugin choices (reward, guards)
            if "plugins" in inspect.signature(factory).parameters:
                options.setdefault("plugins", plugins)
        except (TypeError, ValueError):
            pass
        return [factory(**options) for _ in range(n)]

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        tmp = self.out / "checkpoint.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        if self.actor is not None:
            (tmp / "actor").mkdir()
            if self.actor_engine is not None:
                self.actor_engine.save(tmp / "actor", self.tokenizer)
            else:
                self.actor.save_pretrained(tmp / "actor")
                self.tokenizer.save_pretrained(tmp / "actor")
        if self.critic_engine is not None:
            (tmp / "critic").mkdir()
            self.critic_engine.save(tmp / "critic", self.tokenizer)
        state = {"step": self.step, "stage": self.name, "python_rng": self.rng.getstate(),
                 "torch_generator": self.generator.get_state().tolist()}
        (tmp / "state.json").write_text(json.dumps(state))
        old = self.out / "checkpoint.old"
        if self.ckpt.exists():
            self.ckpt.rename(old)
        tmp.rename(self.ckpt)
        if old.exists():
            shutil.rmtree(old)
        return self.ckpt

    def maybe_checkpoint(self, last: bool) -> None:
        """After each step: checkpoint when due, and when a Ctrl-C asked the run to stop (kag.core.
        interrupt), checkpoint and stop here, between steps, where a rerun resumes cleanly."""
        from kag.core.interrupt import STOP, StopRequested

        every = self.config.save_every
        if last or STOP.is_set() or (every and self.step % every == 0):
            self.save_checkpoint()
        if STOP.is_set() and not last:
            raise StopRequested(f"stopped after step {self.step}; checkpoint at {self.ckpt}")

    def run(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


def _tuplify(x: Any) -> Any:
    return tuple(_tuplify(i) for i in x) if isinstance(x, list) else x
