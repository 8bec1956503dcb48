"""A tiny causal LM and character-level tokenizer built locally (no downloads).

``model = "tiny"`` in a train config uses these: a 2-layer Llama of about 100k parameters and a
tokenizer whose vocabulary is the special chat tokens plus single characters, with a chat
template, so every stage (generation, chat rendering, training, save/load) runs through the same
Hugging Face code as a real model, on a CPU, in seconds.
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


def make_tiny_tokenizer() -> Any:
    """A PreTrainedTokenizerFast: one token per character, chat tokens as special tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + tuple(CHARS))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", eos_token=EOS,
        additional_special_tokens=list(SPECIAL_TOKENS[3:]),
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def make_tiny_model(vocab_size: int, seed: int = 0, hidden: int = 64, layers: int = 2) -> Any:
    """A randomly initialised LlamaForCausalLM (~100k parameters with the default sizes)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=512, tie_word_embeddings=True,
        pad_token_id=0, eos_token_id=SPECIAL_TOKENS.index(EOS), bos_token_id=None,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model


def make_tiny(seed: int = 0) -> tuple[Any, Any]:
    """(model, tokenizer) for tests and ``model = "tiny"``."""
    tok = make_tiny_tokenizer()
    return make_tiny_model(len(tok), seed=seed), tok
