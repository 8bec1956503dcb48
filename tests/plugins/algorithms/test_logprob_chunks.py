"""Training log-probs through the output layer in chunks: the same numbers and gradients as the whole
logits at once, without ever holding the (B, T, V) logits (checked by the largest vocabulary-wide
tensor any operation creates, forward and backward)."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kag.plugins.algorithms.ppo.models import _backbone_and_head, token_logprobs
from kag.plugins.algorithms.ppo.tiny import make_tiny


class LargestVocabTensor(TorchDispatchMode):
    """The most elements of any tensor an operation returns whose last dimension is the vocabulary."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab, self.largest = vocab, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.dim() and t.shape[-1] == self.vocab:
                self.largest = max(self.largest, t.numel())
        return out


@pytest.fixture(scope="module")
def tiny():
    model, tok = make_tiny(seed=3)
    ids = torch.randint(7, len(tok), (3, 40), generator=torch.Generator().manual_seed(0))
    attn = torch.ones_like(ids)
    attn[0, :5] = 0  # left padding on one row
    return model, ids, attn


def _grads(model, chunk, entropy_grad):
    model.zero_grad()
    logp, ent = token_logprobs(model, *_inputs, with_entropy=True, entropy_grad=entropy_grad, chunk_tokens=chunk)
    (logp.sum() + (ent.sum() if entropy_grad else 0)).backward()
    return logp.detach(), ent.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


_inputs: tuple = ()


@pytest.mark.parametrize("entropy_grad", [False, True])
def test_chunks_give_the_same_logprobs_entropy_and_gradients(tiny, entropy_grad):
    global _inputs
    model, ids, attn = tiny
    _inputs = (ids, attn, 0.7)
    assert _backbone_and_head(model) is not None
    whole = _grads(model, 0, entropy_grad)
    chunked = _grads(model, 7, entropy_grad)  # 117 positions: 17 chunks, the last one short
    assert torch.allclose(whole[0], chunked[0], atol=1e-5) and torch.allclose(whole[1], chunked[1], atol=1e-5)
    assert whole[2].keys() == chunked[2].keys() and len(whole[2]) > 5
    for name, g in whole[2].items():
        assert torch.allclose(g, chunked[2][name], atol=1e-5, rtol=1e-4), name


def test_no_operation_makes_the_whole_logits_when_chunked(tiny):
    model, ids, attn = tiny
    vocab = model.config.vocab_size
    sizes = {}
    for chunk in (0, 16):
        with LargestVocabTensor(vocab) as seen:
            logp, ent = token_logprobs(model, ids, attn, with_entropy=True, chunk_tokens=chunk)
            logp.sum().backward()
        sizes[chunk] = seen.largest
        assert ent.grad_fn is None  # logged only: no graph kept for the entropy
    assert sizes[0] >= ids.shape[0] * (ids.shape[1] - 1) * vocab  # the test sees the whole logits when they exist
    # a chunk's logits (16 x V), or the output layer's own (transposed) weight, never more
    assert sizes[16] <= max(16, model.config.hidden_size) * vocab < sizes[0]


def test_models_whose_logits_are_rescaled_keep_the_whole_logits_path(tiny):
    model, ids, attn = tiny
    model.config.final_logit_softcapping = 30.0
    try:
        assert _backbone_and_head(model) is None
        with LargestVocabTensor(model.config.vocab_size) as seen:
            token_logprobs(model, ids, attn, chunk_tokens=16)
        assert seen.largest >= ids.shape[0] * (ids.shape[1] - 1) * model.config.vocab_size
    finally:
        model.config.final_logit_softcapping = None
