"""Crawlers: torch.nn / functional / tensor ops and transformers submodules become runnable seeds."""

from __future__ import annotations

import importlib.util

import pytest

from kag.core.records import from_dict, to_dict
from kag.core.data.synthesis import Seed
from kag.core.tasks import check_task_code, load_module
from kag.plugins.data.crawl_torch import TorchCrawler
from kag.plugins.data.crawl_transformers import TransformersCrawler


@pytest.fixture(scope="module")
def torch_crawl():
    return TorchCrawler().crawl()


def test_torch_crawl_counts_add_up(torch_crawl):
    r = torch_crawl
    assert r.found == len(r.seeds) + len(r.failed) + len(r.skipped)
    assert len(r.seeds) >= 100
    assert all(reason for reason in {**r.failed, **r.skipped}.values())


def test_torch_crawl_covers_the_families(torch_crawl):
    ops = {s.op for s in torch_crawl.seeds}
    for op in ("Conv1d", "Conv2d", "Conv3d", "MaxPool1d", "AvgPool3d", "BatchNorm2d", "LayerNorm", "GroupNorm",
               "Linear", "GELU", "Softmax", "ConvTranspose2d", "cumsum", "logsumexp"):
        assert op in ops, op
    ranks = {s.op: s.rank for s in torch_crawl.seeds}
    assert (ranks["Conv1d"], ranks["Conv2d"], ranks["Conv3d"]) == (3, 4, 5)


def test_random_and_unusable_classes_are_explained(torch_crawl):
    why = {**torch_crawl.failed, **torch_crawl.skipped}
    assert why["nn.Dropout"] == "random (dropout)"
    assert why["nn.Embedding"] == "needs integer indices"
    assert why["nn.MSELoss"].startswith("loss")
    assert why["F.gumbel_softmax"].startswith("random")


def test_seeds_are_valid_tasks_and_round_trip(torch_crawl):
    import torch

    for seed in torch_crawl.seeds[::10]:
        check_task_code(seed.code, seed.id)
        ns = load_module(seed.code, seed.id)
        out = ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
        assert isinstance(out, torch.Tensor) and list(out.shape) == seed.made_by["out_shape"]
        assert from_dict(Seed, to_dict(seed)) == seed


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_transformers_submodules_from_tiny_configs():
    r = TransformersCrawler(families="llama,bert,gpt2").crawl()
    ops = {s.op for s in r.seeds}
    assert {"llama.LlamaMLP", "llama.LlamaRMSNorm", "bert.BertSelfAttention", "bert.BertLMPredictionHead",
            "gpt2.GPT2MLP", "gpt2.GPT2Block"} <= ops
    assert r.failed["llama.LlamaAttention"]  # needs position embeddings: counted, not crashed
    assert r.skipped["llama.LlamaModel"] == "whole model (needs token ids)"
    seed = next(s for s in r.seeds if s.op == "llama.LlamaMLP")
    assert seed.source == "transformers#llama" and "LlamaConfig(" in seed.code and "attn_implementation='eager'" in seed.code
    check_task_code(seed.code, seed.id)


def test_transformers_family_must_be_known():
    from kag.core.tasks import TaskError

    with pytest.raises(TaskError, match="unknown transformers families"):
        TransformersCrawler(families="nope")
