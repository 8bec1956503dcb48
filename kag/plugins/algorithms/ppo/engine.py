"""Optimisation engines: plain torch (CPU tests, one GPU) and DeepSpeed ZeRO (imported only when
chosen). Both take micro-batch losses already normalised by the global batch's token count, so
gradients are summed across micro-batches, never averaged again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


class TorchEngine:
    def __init__(self, model: torch.nn.Module, lr: float, weight_decay: float = 0.0, grad_clip: float = 1.0):
        self.module = model
        self.grad_clip = grad_clip
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))

    def backward(self, loss: torch.Tensor, last_micro: bool = True) -> None:
        loss.backward()

    def step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    def save(self, path: Path, tokenizer: Any | None = None) -> None:
        self.module.save_pretrained(path)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
        torch.save(self.optimizer.state_dict(), path / "optimizer.pt")

    def load_optimizer(self, path: Path) -> None:
        file = path / "optimizer.pt"
        if file.is_file():
            self.optimizer.load_state_dict(torch.load(file, map_location="cpu", weights_only=False))


class DeepSpeedEngine:
    """ZeRO (stage 1-3) through ``deepspeed.initialize``; run under the ``deepspeed`` launcher for
    several GPUs or nodes. Micro-batch boundaries are set explicitly because the number of
    micro-batches per optimiser step follows the rollout batch."""

    def __init__(self, model: torch.nn.Module, lr: float, weight_decay: float = 0.0, grad_clip: float = 1.0,
                 zero_stage: int = 2, bf16: bool = True):
        import deepspeed

        config = {
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1,
            "gradient_clipping": grad_clip,
            "zero_optimization": {"stage": zero_stage},
            "bf16": {"enabled": bf16},
            "optimizer": {"type": "AdamW", "params": {"lr": lr, "weight_decay": weight_decay, "betas": [0.9, 0.95]}},
        }
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            model=model, model_parameters=[p for p in model.parameters() if p.requires_grad], config=config)
        self.module = self.engine.module
        self.zero_stage = zero_stage

    def backward(self, loss: torch.Tensor, last_micro: bool = True) -> None:
        self.engine.set_gradient_accumulation_boundary(last_micro)
        self.engine.backward(loss, scale_wrt_gas=False)

    def step(self) -> float:
        self.engine.set_gradient_accumulation_boundary(True)
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    def save(self, path: Path, tokenizer: Any | None = None) -> None:
        import deepspeed

        self.engine.save_checkpoint(str(path / "deepspeed"))
        params = list(self.module.parameters()) if self.zero_stage == 3 else []
        with deepspeed.zero.GatheredParameters(params, enabled=self.zero_stage == 3):
            if self.engine.global_rank == 0:
                self.module.save_pretrained(path)
                if tokenizer is not None:
                    tokenizer.save_pretrained(path)

    def load_optimizer(self, path: Path) -> None:
        if (path / "deepspeed").is_dir():
            self.engine.load_checkpoint(str(path / "deepspeed"), load_module_strict=False)


def make_engine(kind: str, model: torch.nn.Module, lr: float, weight_decay: float, grad_clip: float,
                zero_stage: int = 2, bf16: bool = True) -> TorchEngine | DeepSpeedEngine:
    if kind == "torch":
        return TorchEngine(model, lr, weight_decay, grad_clip)
    if kind == "deepspeed":
        try:
            import deepspeed  # noqa: F401
        except ImportError as exc:
            raise RuntimeError("engine = \"deepspeed\" needs DeepSpeed: pip install deepspeed "
                               "(or set engine = \"torch\" in the train config)") from exc
        return DeepSpeedEngine(model, lr, weight_decay, grad_clip, zero_stage, bf16)
    raise ValueError(f"unknown engine {kind!r}; choose \"torch\" or \"deepspeed\"")
