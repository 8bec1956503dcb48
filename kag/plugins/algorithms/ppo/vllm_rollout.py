"""Rollouts through an in-process vLLM engine, weights synced from the trainer every step.

Selected by ``rollout_engine = "vllm"`` in the train config (default ``"hf"``: the trainer's own
model samples with a KV cache). The engine samples token ids and returns each sampled token's
log-prob (``SamplingParams(logprobs=0)`` with ``logprobs_mode="processed_logprobs"``, i.e. after
temperature, the quantity the trainer computes); the trainer keeps those ids, never re-tokenising.

Weight sync (vLLM 0.32, read off the installed source): the engine runs in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so ``LLM.collective_rpc("reload_weights", kwargs=
{"weights_iterator": ..., "is_checkpoint_format": True})`` hands our tensors to the worker without
pickling. The worker's ``reload_weights`` wraps the model's own ``load_weights`` (Hugging Face
names in; q/k/v and gate/up fused there) in vLLM's layerwise-reload machinery, which re-runs the
post-load processing (the CPU backend repacks linear weights into kernel layouts, after which a
bare ``model.load_weights`` fails with "'Parameter' object has no attribute 'weight_loader'").
Older vLLM without that worker method: ``LLM.apply_model(lambda m: m.load_weights(...))``, i.e. the
former ``llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights(...)``. vLLM
0.32 also has a ``weight_transfer_config`` / ``update_weights`` RPC (NCCL) for trainers in other
processes; a colocated trainer does not need it.

Pitfalls handled here: (1) stale weights after sleep: a sleeping engine's weights are offloaded
(level 1) or discarded (level 2) and waking restores the offloaded copy, so ``sync_weights``
wakes the weights first, loads, then wakes the KV cache; (2) stale KV: prefix-cache blocks were
computed with the old weights, so the prefix cache is reset after every sync.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import torch


def vllm_missing_reason() -> str | None:
    """None when vLLM imports, else why not (and how to get it)."""
    from kag.plugin import missing

    reason = missing("vllm", "rollout_engine = \"vllm\"")
    return f"{reason}; or set rollout_engine = \"hf\" in the train config" if reason else None


class VLLMRollout:
    """A vLLM ``LLM`` that samples for the trainer; ``sync_weights(model)`` before each rollout."""

    def __init__(self, model_path: str | Path, *, dtype: str = "auto", seed: int = 0, max_model_len: int = 4096,
                 gpu_memory_utilization: float = 0.3, enforce_eager: bool = True, enable_sleep_mode: bool = False,
                 **llm_options: Any):
        reason = vllm_missing_reason()
        if reason:
            raise RuntimeError(reason)
        # In-process engine core: apply_model then runs our closure on the live module.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        from vllm import LLM

        options: dict[str, Any] = dict(model=str(model_path), dtype=dtype, seed=seed, max_model_len=max_model_len,
                                       enforce_eager=enforce_eager, logprobs_mode="processed_logprobs",
                                       enable_sleep_mode=enable_sleep_mode, disable_log_stats=True)
        if torch.cuda.is_available():
            options["gpu_memory_utilization"] = gpu_memory_utilization
        options.update(llm_options)
        self.llm = LLM(**options)
        self.sleep_enabled = enable_sleep_mode
        self.asleep = False
        self.version = 0  # number of weight syncs so far

    # -- weights ---------------------------------------------------------------------------------
    def sync_weights(self, model: torch.nn.Module) -> int:
        """Load ``model``'s current parameters (HF names) into the engine; returns how many tensors
        were sent. Call after every optimiser step, before sampling."""
        weights = [(name, tensor.detach()) for name, tensor in model.state_dict().items()]
        if self.asleep:
            self.llm.wake_up(tags=["weights"])  # load into live weights, not into a copy waking would overwrite
        try:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights),
                                                             "is_checkpoint_format": True})
        except AttributeError as exc:  # a vLLM whose workers have no reload_weights
            if "reload_weights" not in str(exc):
                raise
            self.llm.apply_model(lambda module: module.load_weights(iter(weights)))
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        self.version += 1
        return len(weights)

    def sleep(self, level: int = 1) -> None:
        """Free the engine's GPU memory while the trainer runs (needs enable_sleep_mode)."""
        if self.sleep_enabled and not self.asleep:
            self.llm.sleep(level=level)
            self.asleep = True

    # -- sampling --------------------------------------------------------------------------------
    def sample(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, eos_id: int, pad_id: int,
               temperature: float = 1.0, generator: torch.Generator | None = None) -> list[tuple[list[int], list[float]]]:
        """Same contract as ``rollout.sample_tokens``: per prompt the sampled ids (eos included when
        reached) and their log-probs under softmax(logits / temperature)."""
        from vllm import SamplingParams

        if self.asleep:
            raise RuntimeError("the vLLM engine is asleep; call sync_weights(model) before sampling")
        seeds = torch.randint(0, 2**31 - 1, (len(prompts),), generator=generator).tolist()
        stop = sorted({i for i in (eos_id, pad_id) if i is not None})
        params = [SamplingParams(max_tokens=max_new_tokens, temperature=temperature, logprobs=0, seed=int(s),
                                 stop_token_ids=stop, detokenize=False) for s in seeds]
        outputs = self.llm.generate([{"prompt_token_ids": list(p)} for p in prompts], params, use_tqdm=False)
        return [sampled_with_logprobs(out.outputs[0]) for out in outputs]

    def shutdown(self) -> None:
        engine = getattr(self.llm, "llm_engine", None)
        if engine is not None and hasattr(engine, "shutdown"):
            engine.shutdown()


def sampled_with_logprobs(completion: Any) -> tuple[list[int], list[float]]:
    """(token ids, log-prob of each) from a vLLM ``CompletionOutput`` sampled with logprobs=0."""
    ids = [int(t) for t in completion.token_ids]
    if completion.logprobs is None or len(completion.logprobs) != len(ids):
        raise RuntimeError("vLLM returned no per-token log-probs; sample with SamplingParams(logprobs=0)")
    return ids, [float(step[t].logprob) for t, step in zip(ids, completion.logprobs)]


def export_for_vllm(model: torch.nn.Module, tokenizer: Any, path: Path) -> Path:
    """Save the trainer's model and tokenizer where vLLM can load them (its architecture and
    tokenizer come from this directory; the weights are synced each step afterwards)."""
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
