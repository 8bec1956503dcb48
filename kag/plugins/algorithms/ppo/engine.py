"""Optimisation engines: plain torch (CPU tests, one GPU) and DeepSpeed ZeRO (imported only when
chosen). Both take micro-batch losses already normalised by the global batch's token count, so
gradients are summed across micro-batches, never averaged again."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import torch


def scale_lrs(optimizer: Any, base_lrs: list[float], factor: float) -> None:
    """Each parameter group's configured learning rate times ``factor`` (both engines' optimizers)."""
    for group, base in zip(optimizer.param_groups, base_lrs):
        group["lr"] = base * factor


class TorchEngine:
    """AdamW on the model's parameters. A model in a low precision (``dtype = "bfloat16"``) trains
    in mixed precision: the optimizer holds fp32 master weights (and fp32 Adam state); each
    micro-batch's bf16 gradients are added into fp32 master gradients at once (the bf16 ones
    freed), clipping and the step act on the masters, and the model's weights are the masters
    rounded to bf16 after each step. Without masters, an update smaller than a weight's bf16
    spacing (2^-8 of it: lr 1e-6 against any weight) would be rounded away."""

    MASTER_FILE = "master_weights.pt"

    def __init__(self, model: torch.nn.Module, lr: float, weight_decay: float = 0.0, grad_clip: float = 1.0):
        self.module = model
        self.forward_model = model  # what the stages call for training forwards
        self.grad_clip = grad_clip
        self.params = list(model.parameters())
        low = any(p.dtype in (torch.bfloat16, torch.float16) for p in self.params)
        self.master = [p.detach().float().clone().requires_grad_(True) for p in self.params] if low else None
        self.optimizer = torch.optim.AdamW(self.master or self.params, lr=lr, weight_decay=weight_decay,
                                           betas=(0.9, 0.95))
        self.base_lrs = [g["lr"] for g in self.optimizer.param_groups]

    def set_lr_factor(self, factor: float) -> None:
        """The configured learning rate times ``factor`` (the stage's schedule) from the next step on."""
        scale_lrs(self.optimizer, self.base_lrs, factor)

    def backward(self, loss: torch.Tensor, last_micro: bool = True) -> None:
        loss.backward()
        if self.master is not None:  # accumulate in fp32, not in the bf16 .grad
            for p, m in zip(self.params, self.master):
                if p.grad is not None:
                    g = p.grad.float()
                    m.grad = g if m.grad is None else m.grad.add_(g)
                    p.grad = None

    def generation_context(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext(self.module)

    def step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.master or self.params, self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.master is not None:
            with torch.no_grad():
                for p, m in zip(self.params, self.master):
                    p.copy_(m)
        return float(norm)

    def save(self, path: Path, tokenizer: Any | None = None) -> None:
        self.module.save_pretrained(path)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
        torch.save(self.optimizer.state_dict(), path / "optimizer.pt")
        if self.master is not None:
            torch.save([m.detach() for m in self.master], path / self.MASTER_FILE)

    def load_optimizer(self, path: Path) -> None:
        """Optimizer state, and the fp32 master weights where the model trains in bf16 (a checkpoint
        without them, e.g. written by an fp32 run, leaves the masters read from the bf16 weights)."""
        file = path / "optimizer.pt"
        if file.is_file():
            self.optimizer.load_state_dict(torch.load(file, map_location="cpu", weights_only=False))
        masters = path / self.MASTER_FILE
        if self.master is not None and masters.is_file():
            saved = torch.load(masters, map_location="cpu", weights_only=True)
            if len(saved) != len(self.master):
                raise ValueError(f"{masters}: {len(saved)} master tensors for {len(self.master)} parameters")
            with torch.no_grad():
                for p, m, s in zip(self.params, self.master, saved):
                    m.copy_(s)
                    p.copy_(m)


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra``'s keys put in, tables merged key by key (a user's ``deepspeed_config``)."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def deepspeed_config(lr: float, weight_decay: float, grad_clip: float, zero_stage: int, bf16: bool,
                     micro_batch_size: int = 1, accumulation_steps: int = 1,
                     extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``deepspeed.initialize`` config: ZeRO stage, bf16, AdamW with the configured lr.

    ``torch_adam`` makes DeepSpeed wrap ``torch.optim.AdamW`` instead of JIT-compiling its fused CUDA
    Adam (a wheel built with DS_BUILD_OPS=0 has no prebuilt ops). The batch sizes are what one
    optimiser step sees; the stages still mark accumulation boundaries themselves. ``extra`` (the
    train config's ``deepspeed_config``) is merged in last: optimizer offload
    (``zero_optimization.offload_optimizer``), bucket sizes, anything DeepSpeed reads.
    """
    return merged({
        "train_micro_batch_size_per_gpu": micro_batch_size,
        "gradient_accumulation_steps": accumulation_steps,
        "gradient_clipping": grad_clip,
        "zero_optimization": {"stage": zero_stage},
        "bf16": {"enabled": bf16},
        "optimizer": {"type": "AdamW", "params": {"lr": lr, "weight_decay": weight_decay, "betas": [0.9, 0.95],
                                                  "torch_adam": True, "adam_w_mode": True}},
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }, extra or {})


def single_process_env() -> None:
    """Without the ``deepspeed`` launcher (one GPU, or the CPU), stand in for the variables it sets."""
    import os
    import socket

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.update({"MASTER_ADDR": os.environ.get("MASTER_ADDR", "127.0.0.1"),
                       "MASTER_PORT": os.environ.get("MASTER_PORT", str(port)),
                       "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"})


class DeepSpeedEngine:
    """ZeRO (stage 0-3) through ``deepspeed.initialize``; run under the ``deepspeed`` launcher for
    several GPUs or nodes, or as a plain process for one. Micro-batch boundaries are set explicitly
    because the number of micro-batches per optimiser step follows the rollout batch.

    Checkpoints hold both formats: ``deepspeed/`` (``save_checkpoint``: bf16 module, fp32 master
    weights, optimizer state, one shard per rank) for resuming, and the Hugging Face model
    (``save_pretrained``) for the next stage or for serving."""

    def __init__(self, model: torch.nn.Module, lr: float, weight_decay: float = 0.0, grad_clip: float = 1.0,
                 zero_stage: int = 2, bf16: bool = True, micro_batch_size: int = 1, accumulation_steps: int = 1,
                 extra_config: dict[str, Any] | None = None):
        import deepspeed

        single_process_env()
        deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
        self.config = deepspeed_config(lr, weight_decay, grad_clip, zero_stage, bf16, micro_batch_size,
                                       accumulation_steps, extra_config)
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            model=model, model_parameters=[p for p in model.parameters() if p.requires_grad], config=self.config)
        self.module = self.engine.module
        # training forwards go through the engine: under ZeRO-3 a forward of the bare module keeps
        # only the last micro-batch's gradient of an accumulated step (measured: DeepSpeed 0.19.8)
        self.forward_model = self.engine
        self.zero_stage = zero_stage
        self.base_lrs = [g["lr"] for g in self.optimizer.param_groups]

    def set_lr_factor(self, factor: float) -> None:
        scale_lrs(self.optimizer, self.base_lrs, factor)

    @contextlib.contextmanager
    def generation_context(self) -> Iterator[Any]:
        """Sampling without collectives: under ZeRO-3 the whole model is gathered on each rank once
        and its partitioning hooks lifted until sampling ends, so ranks whose episodes stop after
        different numbers of tokens never wait for each other (as TRL and OpenRLHF sample)."""
        if self.zero_stage != 3:
            yield self.module
            return
        from deepspeed.runtime.zero.stage3 import unwrap_model_for_generation

        with unwrap_model_for_generation(self.engine):
            yield self.module

    def backward(self, loss: torch.Tensor, last_micro: bool = True) -> None:
        self.engine.set_gradient_accumulation_boundary(last_micro)
        self.engine.backward(loss, scale_wrt_gas=False)  # losses are already normalised per global batch

    def step(self) -> float:
        self.engine.set_gradient_accumulation_boundary(True)
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    def save(self, path: Path, tokenizer: Any | None = None) -> None:
        import deepspeed

        self.engine.save_checkpoint(str(path / "deepspeed"), tag="latest_step")
        params = list(self.module.parameters()) if self.zero_stage == 3 else []
        with deepspeed.zero.GatheredParameters(params, enabled=self.zero_stage == 3):
            if self.engine.global_rank == 0:
                self.module.save_pretrained(path)
                if tokenizer is not None:
                    tokenizer.save_pretrained(path)

    def load_optimizer(self, path: Path) -> None:
        """Resume module, fp32 master weights and optimizer state from ``path/deepspeed``."""
        if (path / "deepspeed").is_dir():
            load_path, _ = self.engine.load_checkpoint(str(path / "deepspeed"), load_module_strict=False)
            if load_path is None:
                raise RuntimeError(f"{path / 'deepspeed'}: DeepSpeed found no checkpoint to resume from")


def make_engine(kind: str, model: torch.nn.Module, lr: float, weight_decay: float, grad_clip: float,
                zero_stage: int = 2, bf16: bool = True, micro_batch_size: int = 1,
                accumulation_steps: int = 1, extra_config: dict[str, Any] | None = None) -> TorchEngine | DeepSpeedEngine:
    if kind == "torch":
        if extra_config:
            raise ValueError("deepspeed_config is set but engine = \"torch\"; set engine = \"deepspeed\" or remove it")
        return TorchEngine(model, lr, weight_decay, grad_clip)
    if kind == "deepspeed":
        from kag.plugin import missing

        reason = missing("deepspeed", "engine = \"deepspeed\"")
        if reason:
            raise RuntimeError(f"{reason}; or set engine = \"torch\" in the train config")
        return DeepSpeedEngine(model, lr, weight_decay, grad_clip, zero_stage, bf16, micro_batch_size,
                               accumulation_steps, extra_config)
    raise ValueError(f"unknown engine {kind!r}; choose \"torch\" or \"deepspeed\"")
