"""Actor (HF causal LM), critic (HF backbone + scalar value head), chat rendering, and the
per-token quantities PPO needs (log-probs, entropy, values) aligned to the predicted tokens.

Alignment: for a sequence ``ids`` of length L, position i of every (B, L-1) tensor here is about
token ``ids[i+1]``: the log-prob of choosing it, and the value of the state it was chosen in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import torch
from torch import nn

VALUE_HEAD_FILE = "value_head.pt"


def quiet_transformers() -> None:
    """No per-file progress bars from save/load: stage logs are the JSONL metrics."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def load_actor(spec: str, seed: int = 0) -> tuple[Any, Any]:
    """(model, tokenizer) from ``tiny`` or a local path / Hugging Face id."""
    quiet_transformers()
    from kag.plugins.algorithms.ppo.tiny import MODEL_SPECS

    if spec in MODEL_SPECS:
        from kag.plugins.algorithms.ppo.tiny import make_tiny

        return make_tiny(seed=seed, family=MODEL_SPECS[spec])
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(spec)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return AutoModelForCausalLM.from_pretrained(spec, dtype=torch.float32), tok


def load_tokenizer(spec: str) -> Any:
    """The tokenizer alone (the critic-only stage needs its pad id, not the actor)."""
    from kag.plugins.algorithms.ppo.tiny import MODEL_SPECS

    if spec in MODEL_SPECS:
        from kag.plugins.algorithms.ppo.tiny import make_tiny_tokenizer

        return make_tiny_tokenizer(MODEL_SPECS[spec])
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(spec)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


class ValueModel(nn.Module):
    """A causal LM's backbone with a linear head giving one value per position."""

    def __init__(self, backbone: nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone
        self.value_head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                remove_padding: bool = False) -> torch.Tensor:
        """(B, L) values; with ``remove_padding`` the rows run packed into one (pad positions: 0)."""
        if remove_padding:
            packed = Packed.of(input_ids, attention_mask, self.backbone)
            out = self.backbone(**packed.model_inputs(), use_cache=False)
            hidden = out.last_hidden_state[0].to(self.value_head.weight.dtype)
            return packed.unpack(self.value_head(hidden).float().squeeze(-1))
        pos = position_ids(attention_mask)
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=pos, use_cache=False)
        hidden = out.last_hidden_state.to(self.value_head.weight.dtype)  # bf16 weights, else fp32
        return self.value_head(hidden).float().squeeze(-1)

    def save_pretrained(self, path: str | Path) -> None:
        path = Path(path)
        self.backbone.save_pretrained(path)
        torch.save(self.value_head.state_dict(), path / VALUE_HEAD_FILE)

    @property
    def config(self) -> Any:
        return self.backbone.config


def critic_from_actor(actor: nn.Module) -> ValueModel:
    """A critic initialised from the actor's backbone weights (the paper starts both from one model)."""
    import copy

    base = getattr(actor, "base_model_prefix", "model")
    backbone = copy.deepcopy(getattr(actor, base))
    return ValueModel(backbone, actor.config.hidden_size)


def load_critic(path: str | Path) -> ValueModel:
    """A critic from a directory: a saved ValueModel (value_head.pt present) or a causal LM."""
    from transformers import AutoModel

    path = Path(path)
    backbone = AutoModel.from_pretrained(path, dtype=torch.float32)
    critic = ValueModel(backbone, backbone.config.hidden_size)
    head = path / VALUE_HEAD_FILE
    if head.is_file():
        critic.value_head.load_state_dict(torch.load(head, map_location="cpu", weights_only=True))
    return critic


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that start at 0 on each sequence's first real token (left padding safe)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


# model families whose Hugging Face attention keeps packed sequences apart when given no attention mask
# and position ids that restart at 0 on each sequence (transformers' masking_utils finds the sequences
# from the position ids: a block-diagonal causal mask for eager / sdpa, varlen kernels for flash)
PACKABLE_MODEL_TYPES = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})


@attrs.define
class Packed:
    """The real tokens of (B, W) padded rows as one (1, N) row, N the sum of the rows' lengths, with
    position ids restarting at 0 on each row (padding removal). Each row's real tokens must be
    contiguous (left or right padding).

    Cost: the linear layers see N tokens instead of B x W. Attention is per sequence only with
    varlen kernels (``flash_attention_2``); under sdpa / eager, transformers builds an (N, N)
    block-diagonal mask and attention costs N^2, which can exceed the padded B x W^2 (measured
    slower than padded on a CPU)."""

    input_ids: torch.Tensor  # (1, N)
    position_ids: torch.Tensor  # (1, N)
    keep: torch.Tensor  # (B, W) bool: where each packed token came from

    @classmethod
    def of(cls, input_ids: torch.Tensor, attention_mask: torch.Tensor, model: nn.Module) -> "Packed":
        check_packable(model)
        keep = attention_mask.bool()
        return cls(input_ids[keep][None], position_ids(attention_mask)[keep][None], keep)

    def model_inputs(self) -> dict[str, Any]:
        return {"input_ids": self.input_ids, "attention_mask": None, "position_ids": self.position_ids}

    def next_tokens(self) -> torch.Tensor:
        """(N,): the packed token after each one (its target; across a row's end it is never used)."""
        ids = self.input_ids[0]
        return torch.cat([ids[1:], ids[:1]])

    def unpack(self, flat: torch.Tensor) -> torch.Tensor:
        """(N,) per packed token -> (B, W), 0 at padding."""
        out = flat.new_zeros(self.keep.shape)
        out[self.keep] = flat
        return out

    def unpack_next(self, flat: torch.Tensor) -> torch.Tensor:
        """(N,) per packed token about its next token -> (B, W-1) aligned to ids[:, 1:]: 0 wherever
        position i or i+1 is padding (so never a row's last token, whose next packed token is another row's)."""
        both = (self.keep[:, :-1] & self.keep[:, 1:]).to(flat.dtype)
        return self.unpack(flat)[:, :-1] * both


def check_packable(model: nn.Module) -> None:
    """Refuse padding removal for a model whose attention might let packed sequences see each other."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in PACKABLE_MODEL_TYPES:
        raise ValueError(f"remove_padding: model type {kind!r} is not known to keep packed sequences apart; "
                         f"known: {', '.join(sorted(PACKABLE_MODEL_TYPES))} (set remove_padding = false)")
    try:
        from transformers.masking_utils import find_packed_sequence_indices  # noqa: F401
    except ImportError as exc:  # older transformers: position ids alone would not separate the sequences
        raise ValueError("remove_padding needs a transformers version whose masking_utils finds packed "
                         "sequences from position ids (find_packed_sequence_indices)") from exc


LOGIT_CHUNK_TOKENS = 2048  # positions whose logits exist at once (x vocabulary x 4 bytes): 1.2 GB at a 152k vocabulary


def token_logprobs(
    actor: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
    temperature: float = 1.0, with_entropy: bool = False, entropy_grad: bool = False,
    chunk_tokens: int = LOGIT_CHUNK_TOKENS, remove_padding: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, L-1) log-probs of ids[:, 1:] under the actor, and optionally the entropy there.

    Memory: the logits of a long sequence are the largest tensor of a training step (B x T x V in
    fp32: 20 GB for one 32k-token sequence at a 152k vocabulary, three times over with the softmax
    and entropy). Here the backbone's hidden states go through the output layer ``chunk_tokens``
    positions at a time, each chunk under activation checkpointing (its logits are recomputed in
    the backward pass, never kept), so at most one chunk's logits exist. The entropy is computed
    without a graph unless ``entropy_grad`` (an entropy bonus in the loss). ``chunk_tokens = 0``,
    or a model whose logits are not a plain linear map of its last hidden state: the whole logits
    at once. So too under DeepSpeed ZeRO-3, whose training forwards must go through the engine
    (a forward of the bare module there keeps only the last micro-batch's gradient): chunking
    there is not done yet.

    ``remove_padding``: the rows' real tokens run through the model as one packed row (``Packed``),
    no padding token in any layer; the results are unpacked to (B, L-1), 0 wherever padding is.
    """
    model = getattr(actor, "module", actor)  # a DeepSpeed engine wraps the Hugging Face model
    zero3 = model is not actor and getattr(actor, "zero_optimization_stage", lambda: 0)() == 3
    split = _backbone_and_head(model) if chunk_tokens > 0 and not zero3 else None
    entropy = ("grad" if entropy_grad else "detached") if with_entropy else "none"
    if remove_padding:
        packed = Packed.of(input_ids, attention_mask, model)
        inputs, targets = packed.model_inputs(), packed.next_tokens()[None]  # (1, N): about the next packed token
    else:
        packed, targets = None, input_ids[:, 1:]
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask,
                  "position_ids": position_ids(attention_mask)}
    if split is None:
        logits = actor(**inputs, use_cache=False).logits
        logp, ent = _logprobs_from_logits(logits if packed is not None else logits[:, :-1], targets, temperature, entropy)
    else:
        hidden = split[0](**inputs, use_cache=False).last_hidden_state
        logp, ent = _chunked(split[1], hidden if packed is not None else hidden[:, :-1], targets, temperature, entropy,
                             chunk_tokens)
    if packed is None:
        return logp, ent
    return packed.unpack_next(logp[0]), (packed.unpack_next(ent[0]) if ent is not None else None)


def _chunked(head: nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperature: float, entropy: str,
             chunk_tokens: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, T) log-probs (and entropy) of ``targets`` from (B, T, H) hidden states, ``chunk_tokens``
    positions through the output layer at a time, each chunk's logits recomputed in backward."""
    b, t, h = hidden.shape
    flat, flat_targets = hidden.reshape(b * t, h), targets.reshape(b * t)
    logps, ents = [], []
    checkpointed = torch.is_grad_enabled() and flat.requires_grad
    for start in range(0, b * t, chunk_tokens):
        piece, want = flat[start:start + chunk_tokens], flat_targets[start:start + chunk_tokens]
        if checkpointed:
            from torch.utils.checkpoint import checkpoint

            lp, ent = checkpoint(_chunk_logprobs, head, piece, want, temperature, entropy, use_reentrant=False)
        else:
            lp, ent = _chunk_logprobs(head, piece, want, temperature, entropy)
        logps.append(lp)
        ents.append(ent)
    logp = torch.cat(logps).reshape(b, t)
    return logp, (torch.cat(ents).reshape(b, t) if entropy != "none" else None)


def _chunk_logprobs(head: nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperature: float,
                    entropy: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(target) for a (N, H) chunk of hidden states, and its entropy (as _logprobs_from_logits)."""
    return _logprobs_from_logits(head(hidden), targets, temperature, entropy)


def _logprobs_from_logits(logits: torch.Tensor, targets: torch.Tensor, temperature: float,
                          entropy: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(target) under softmax(logits / temperature) in fp32, and the entropy: ``"none"``,
    ``"detached"`` (for the logs: no graph) or ``"grad"`` (an entropy bonus in the loss). The one
    formula both paths (whole logits, chunks) use."""
    logits = logits.float() / temperature
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets[..., None]).squeeze(-1) - lse
    if entropy == "none":
        return logp, None
    with torch.set_grad_enabled(entropy == "grad" and torch.is_grad_enabled()):
        return logp, lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)


# model families whose logits are exactly lm_head(last hidden state) (read in their Hugging Face
# forward); any other model keeps the whole-logits path, which calls the model's own forward
PLAIN_HEAD_MODEL_TYPES = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})
# config attributes that would change the logits after the output layer, refused even for those
POSTPROCESSED_LOGITS = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale")


def _backbone_and_head(model: nn.Module) -> tuple[nn.Module, nn.Module] | None:
    """(backbone, output layer) of a Hugging Face causal LM of a family whose logits are
    head(last hidden state), else None."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    backbone = getattr(model, "base_model", None)
    config = getattr(model, "config", None)
    if head is None or backbone is None or backbone is model or config is None:
        return None
    if getattr(config, "model_type", None) not in PLAIN_HEAD_MODEL_TYPES:
        return None
    if any(getattr(config, name, None) not in (None, 1, 1.0) for name in POSTPROCESSED_LOGITS):
        return None
    return backbone, head


def enable_checkpointing(model: nn.Module) -> None:
    """Recompute each layer in backward (one layer's activations kept, not all). Hugging Face
    checkpoints only in training mode, and a model read from disk is in eval mode: put it in
    training mode (a model whose config has dropout gets its dropout too)."""
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()


def token_values(critic: ValueModel, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 remove_padding: bool = False) -> torch.Tensor:
    """(B, L-1): V of the state in which ids[:, i+1] was chosen (hidden state at position i)."""
    if remove_padding:
        return critic(input_ids, attention_mask, remove_padding=True)[:, :-1]
    return critic(input_ids, attention_mask)[:, :-1]


class ChatFormat:
    """Renders messages to token ids with the tokenizer's chat template, never re-tokenising
    what the model already produced: mid-episode only the new messages are rendered."""

    def __init__(self, tokenizer: Any):
        self.tok = tokenizer
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("the tokenizer has no chat template; use a chat model or `model = \"tiny\"`")

    def _render(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> list[int]:
        text = self.tok.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False)
        return list(self.tok.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: list[Any]) -> list[int]:
        return self._render([_as_dict(m) for m in messages], add_generation_prompt=True)

    def continuation_ids(self, messages: list[Any], after_eos: bool = True) -> list[int]:
        """Tokens for observation messages appended after a finished assistant turn, ending with
        the next generation prompt (rendered after a placeholder exchange, prefix cut off).

        The cut is right after the assistant turn's end-of-sequence token, the last token the
        model sampled: what a template writes after it (Qwen2.5's newline after ``<|im_end|>``)
        belongs to the continuation, so the model sees its turns exactly as the template renders
        them. ``after_eos=False`` (a response cut at max_new_tokens) starts with the eos token."""
        base = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
        prefix = self._render(base, add_generation_prompt=False)
        full = self._render(base + [_as_dict(m) for m in messages], add_generation_prompt=True)
        if full[: len(prefix)] != prefix:
            raise ValueError("the chat template renders a conversation's prefix differently once more "
                             "messages follow; multi-turn token ids cannot be appended safely")
        eos = self.tok.eos_token_id
        ends = [i for i, t in enumerate(prefix) if t == eos]
        cut = ends[-1] + 1 if ends else len(prefix)  # a template without eos after a turn: its whole text
        tail = full[cut:]
        return tail if after_eos or not ends else [eos, *tail]


def _as_dict(message: Any) -> dict[str, str]:
    if isinstance(message, dict):
        return {"role": message["role"], "content": message.get("content", "")}
    return {"role": message.role, "content": message.content}
