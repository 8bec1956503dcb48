"""Tiny causal LMs and character-level tokenizers built locally (no downloads).

``model = "tiny"`` in a train config uses these: a 2-layer Llama of about 100k parameters and a
tokenizer whose vocabulary is the special chat tokens plus single characters, with a chat
template, so every stage (generation, chat rendering, training, save/load) runs through the same
Hugging Face code as a real model, on a CPU, in seconds. ``model = "tiny-qwen2"`` is the same size
in Qwen2's architecture with the Qwen2.5 chat format (ChatML turns, a default system message, tool
results in ``<tool_response>`` blocks of a user turn, a newline after each ``<|im_end|>``): a recipe
written for Qwen2.5-Coder-7B-Instruct runs end to end with it, chat format included.
"""

from __future__ import annotations

import string
from typing import Any

SPECIAL_TOKENS = ("<pad>", "<unk>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")
CHARS = string.digits + string.ascii_lowercase + " :,.?!-_=+()[]'\"\n"
EOS = "<|end|>"

# "<|role|>content<|end|>" per message; the generation prompt is "<|assistant|>". No default system
# prompt, so rendering observation messages alone yields exactly the tokens appended mid-episode.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


# Qwen2.5's chat format, written out here (no downloads): "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per
# turn, a default system turn when the conversation has none, consecutive tool results in one user
# turn as "<tool_response>" blocks
QWEN_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
QWEN_CHARS = "".join(c for c in string.printable if c not in "\r\x0b\x0c")
QWEN_DEFAULT_SYSTEM = "You are a helpful assistant."
QWEN_TEMPLATE = (
    "{%- if messages and messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}"
    "{%- else %}{{- '<|im_start|>system\n" + QWEN_DEFAULT_SYSTEM + "<|im_end|>\n' }}{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m['role'] == 'system' and loop.first %}"
    "{%- elif m['role'] == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\n<tool_response>\n' + m['content'] + '\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}"
    "{%- else %}{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
FAMILIES = ("llama", "qwen2")
MODEL_SPECS = {"tiny": "llama", "tiny-qwen2": "qwen2"}  # a train config's model = ... -> family


def make_tiny_tokenizer(family: str = "llama") -> Any:
    """A PreTrainedTokenizerFast: one token per character, chat tokens as special tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if family not in FAMILIES:
        raise ValueError(f"tiny model family must be one of {', '.join(FAMILIES)}, got {family!r}")
    qwen = family == "qwen2"
    special = ("<pad>", "<unk>") + QWEN_SPECIAL if qwen else SPECIAL_TOKENS
    vocab = {tok: i for i, tok in enumerate(special + tuple(QWEN_CHARS if qwen else CHARS))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # one piece per character (newlines included for qwen2; the llama tokenizer keeps its original split)
    core.pre_tokenizer = pre_tokenizers.Split(Regex("(?m)." if qwen else "."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", eos_token="<|im_end|>" if qwen else EOS,
        additional_special_tokens=list(special[2:] if qwen else SPECIAL_TOKENS[3:]),
    )
    tok.chat_template = QWEN_TEMPLATE if qwen else CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def make_tiny_model(vocab_size: int, seed: int = 0, hidden: int = 64, layers: int = 2, family: str = "llama",
                    eos_token_id: int | None = None) -> Any:
    """A randomly initialised LlamaForCausalLM or Qwen2ForCausalLM (~100k parameters by default)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    config_cls, model_cls = (Qwen2Config, Qwen2ForCausalLM) if family == "qwen2" else (LlamaConfig, LlamaForCausalLM)
    config = config_cls(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4 if family == "llama" else 2,
        max_position_embeddings=512 if family == "llama" else 4096, tie_word_embeddings=True,
        pad_token_id=0, eos_token_id=SPECIAL_TOKENS.index(EOS) if eos_token_id is None else eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = model_cls(config)
    return model


def make_tiny(seed: int = 0, family: str = "llama") -> tuple[Any, Any]:
    """(model, tokenizer) for tests and ``model = "tiny"`` / ``"tiny-qwen2"``."""
    tok = make_tiny_tokenizer(family)
    return make_tiny_model(len(tok), seed=seed, family=family, eos_token_id=tok.eos_token_id), tok
