"""Composers: rule (shape-aware random stacking) and llm (any policy plugin, tested with replay)."""

from __future__ import annotations

import collections
import importlib.util

import pytest

from kag.core.plugins import Plugins
from kag.core.data.synthesis import (DEFAULT_MIX, ComposeError, SynthesisError, allocate, parse_mix, probe_output)
from kag.core.tasks import check_task_code, load_module
from kag.plugins.data.crawl_torch import TorchCrawler
from kag.plugins.data.crawl_transformers import TransformersCrawler


@pytest.fixture(scope="module")
def seeds():
    found = TorchCrawler().crawl().seeds
    if importlib.util.find_spec("transformers"):
        found += TransformersCrawler(families="llama,bert").crawl().seeds
    return found


def test_allocate_follows_the_mix():
    labels = allocate(1000, DEFAULT_MIX)
    counts = collections.Counter(labels)
    assert counts == {"torch#1": 30, "torch#2": 750, "torch#3": 90, "torch#4": 30, "torch#5": 20, "transformers": 80}
    assert collections.Counter(allocate(7, parse_mix("torch#2=1,torch#3=1"))) == {"torch#2": 4, "torch#3": 3}


def test_parse_mix_rejects_bad_input():
    for bad in ("torch#9=1", "torch#2", "torch#2=x", "torch#2=0"):
        with pytest.raises(SynthesisError):
            parse_mix(bad)


def test_rule_composer_tracks_shapes_and_runs(seeds):
    import torch

    composer = Plugins().create("composer", "rule", profile="cpu")
    for i, bucket in enumerate(["torch#1", "torch#2", "torch#3", "torch#4", "torch#5"]):
        cand = composer.compose(seeds, bucket, i)
        assert len(cand.ops) == int(bucket[-1]) and cand.data_source == bucket
        check_task_code(cand.code, cand.id)
        ns = load_module(cand.code, cand.id)
        with torch.no_grad():
            out = ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
        assert list(out.shape) == cand.made_by["output_shape"]
        assert probe_output(cand.code, cand.made_by["input_shape"])[0] == list(out.shape)
    again = composer.compose(seeds, "torch#3", 2)
    assert again.code == composer.compose(seeds, "torch#3", 2).code  # reproducible from (seed, index)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_rule_composer_transformers_bucket(seeds):
    cand = Plugins().create("composer", "rule").compose(seeds, "transformers", 0)
    assert cand.data_source.startswith("transformers#") and len(cand.ops) == 1
    check_task_code(cand.code, cand.id)


def test_rule_composer_without_seeds_of_a_kind():
    from kag.core.data.synthesis import Seed, Step

    only = [Seed(id="x", op="ReLU", source="torch", family="activation", step=Step(op="ReLU", call="torch.relu({x})"),
                 rank=2, input_shape=[2, 4], code="")]
    with pytest.raises(ComposeError, match="no transformers seeds"):
        Plugins().create("composer", "rule").compose(only, "transformers", 0)


ANSWER = '''I stack a convolution and a GELU.
```python
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3)

    def forward(self, x):
        return torch.nn.functional.gelu(self.conv(x))


def get_inputs():
    return [torch.rand(2, 8, 16, 16)]


def get_init_inputs():
    return [8, 4]
```
'''


def test_llm_composer_through_the_replay_policy(seeds):
    plugins = Plugins()
    calls = [{"content": ANSWER}, {"content": "I cannot."}, {"content": "```python\nx = 1\n```"}]
    composer = plugins.create("composer", "llm", plugins=plugins, policy="replay", policy_options={"calls": calls},
                              repairs=0)
    cand = composer.compose(seeds, "torch#2", 0)
    assert cand.composer == "llm" and cand.data_source == "torch#2"
    assert "Conv2d" in cand.ops and cand.made_by["output_shape"] == [2, 4, 14, 14]
    check_task_code(cand.code, cand.id)
    with pytest.raises(ComposeError, match="no ```python code block"):
        composer.compose(seeds, "torch#2", 1)
    with pytest.raises(ComposeError, match="invalid task"):
        composer.compose(seeds, "torch#2", 2)


def test_llm_prompt_offers_the_menu(seeds):
    from kag.core.records import Message

    seen: list[list[Message]] = []

    class Recorder:
        def act(self, messages, tools):
            seen.append(messages)
            return Message(role="assistant", content=ANSWER)

    plugins = Plugins()
    plugins.registry["policy"].pop("recorder", None)
    from kag.core.plugins import PluginEntry

    plugins.registry["policy"]["recorder"] = PluginEntry("policy", "recorder", Recorder, "test", "test")
    composer = plugins.create("composer", "llm", plugins=plugins, policy="recorder", menu_size=5)
    cand = composer.compose(seeds, "torch#3", 4)
    prompt = seen[0][-1].content
    assert "exactly 3 of these operators" in prompt
    assert all(f"- {op} (" in prompt for op in cand.made_by["menu"])


def test_llm_composer_repairs_a_shape_error_with_the_error_in_the_prompt(seeds):
    """The paper's composer is an LLM that fixes its own mistakes: an answer whose shapes do not fit goes
    back with the error; the fixed answer is the task, and the record says what was repaired."""
    from kag.core.plugins import PluginEntry
    from kag.core.records import Message

    broken = ANSWER.replace("return [torch.rand(2, 8, 16, 16)]", "return [torch.rand(2, 5, 16, 16)]")
    answers = [broken, ANSWER]
    seen: list[list[Message]] = []

    class Scripted:
        def act(self, messages, tools):
            seen.append(list(messages))
            return Message(role="assistant", content=answers[len(seen) - 1])

    plugins = Plugins()
    plugins.registry["policy"]["scripted"] = PluginEntry("policy", "scripted", Scripted, "test", "test")
    composer = plugins.create("composer", "llm", plugins=plugins, policy="scripted")
    cand = composer.compose(seeds, "torch#2", 0)
    assert cand.made_by["output_shape"] == [2, 4, 14, 14] and "rand(2, 8, 16, 16)" in cand.code
    assert len(cand.made_by["repaired"]) == 1 and "task does not run (RuntimeError: " in cand.made_by["repaired"][0]
    repair = seen[1][-1].content
    assert seen[1][-2].content == broken and "cannot be a task: task does not run (RuntimeError" in repair
    assert "Invalid channel dimensions" in repair  # torch's own words on the mismatch (meta device)

    seen.clear()
    answers[:] = [broken, broken, broken]
    with pytest.raises(ComposeError, match=r"task does not run .*; then task does not run .*; then task does not run"):
        composer.compose(seeds, "torch#2", 1)  # two repairs by default, then the item fails with all three
