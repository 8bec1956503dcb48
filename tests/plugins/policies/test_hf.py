"""The hf policy with a tiny Llama built here (tokenizer trained locally, no downloads).

The model is first loaded from disk as the policy would load any checkpoint, then briefly trained
to answer with one tool call, so the test sees a real generation parsed into a real tool call.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterator

import pytest

from kag.core.records import Message, ToolCall
from kag.plugins.policies.hf import messages_for_template, parse_tool_calls

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{%- if m.tool_calls %}{%- for tc in m.tool_calls %}<tool_call>{\"name\": \"{{ tc.function.name }}\", "
    "\"arguments\": {{ tc.function.arguments | tojson }}}</tool_call>{%- endfor %}{%- endif %}<|im_end|>\n"
    "{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<|pad|>"]
TARGET = '<tool_call>{"name": "read", "arguments": {"path": "model.py"}}</tool_call>'


def build_tiny_model(directory: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = [TARGET, "read write edit bash path model.py model_new.py kernels", "system user assistant tool",
              json.dumps({"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}})] * 20
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>",
                                   additional_special_tokens=["<|im_start|>"])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(directory)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, bos_token_id=None)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(directory)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """A tiny model is fastest on one thread (and 2-core CI machines thrash with more)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-llama")
    build_tiny_model(directory)
    return directory


def test_parse_tool_calls():
    content, calls = parse_tool_calls('Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n'
                                      '</tool_call><tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}'
                                      '</tool_call>')
    assert content == "Let me look."
    assert [(c.name, c.arguments) for c in calls] == [("read", {"path": "a"}), ("bash", {"command": "ls"})]
    _, broken = parse_tool_calls('<tool_call>{"name": "write", "arguments": {"path": </tool_call>')
    assert broken[0].name == "write" and "_raw_arguments" in broken[0].arguments
    _, unclosed = parse_tool_calls('<tool_call>{"name": "glob", "arguments": {"pattern": "*"}}')
    assert unclosed[0].name == "glob" and unclosed[0].arguments == {"pattern": "*"}
    assert parse_tool_calls("just prose") == ("just prose", [])


def test_template_messages_carry_argument_dicts():
    msgs = messages_for_template([Message(role="assistant", tool_calls=[ToolCall(id="1", name="read",
                                                                               arguments={"path": "a"})])])
    assert msgs[0]["tool_calls"][0]["function"]["arguments"] == {"path": "a"}


def test_untrained_model_runs_without_breaking(model_dir: Path):
    from kag.plugins.policies.hf import HFPolicy

    policy = HFPolicy(model=str(model_dir), device="cpu", max_new_tokens=12, temperature=1.0, seed=0)
    from kag.plugins.tools.files import ReadTool

    step = policy.act([Message(role="user", content="optimise model.py")], [ReadTool().schema()])
    assert 1 <= len(step.response_token_ids) <= 12
    assert len(step.response_logprobs) == len(step.response_token_ids)
    assert all(lp <= 0 for lp in step.response_logprobs)
    assert step.usage["prompt_tokens"] == len(step.prompt_token_ids) > 20


def test_trained_tiny_model_emits_a_parsed_tool_call(model_dir: Path, tmp_path: Path):
    from kag.core.agent.toolkit import ToolContext, call_tool
    from kag.plugins.policies.hf import HFPolicy
    from kag.plugins.sandboxes.local import LocalSandbox
    from kag.plugins.tools.files import ReadTool

    tools: list = []  # a short prompt keeps the fitting fast; the tools block is covered above
    messages = [Message(role="system", content="You write CUDA."), Message(role="user", content="Read the model.")]
    policy = HFPolicy(model=str(model_dir), device="cpu", max_new_tokens=40)
    prompt = policy.prompt_ids(messages, tools)
    target = policy.tokenizer.encode(TARGET, add_special_tokens=False) + [policy.tokenizer.eos_token_id]
    ids = torch.tensor([prompt + target])
    labels = torch.tensor([[-100] * len(prompt) + target])
    torch.manual_seed(0)
    optim = torch.optim.Adam(policy.model.parameters(), lr=1e-2)
    policy.model.train()
    start = time.monotonic()
    for _ in range(200):
        loss = policy.model(input_ids=ids, labels=labels).loss
        optim.zero_grad()
        loss.backward()
        optim.step()
        if loss.item() < 0.01:
            break
    policy.model.eval()
    assert loss.item() < 0.05, f"tiny model did not fit in {time.monotonic() - start:.0f} s"

    step = policy.act(messages, tools)
    assert step.finish_reason == "tool_calls" and step.message.content == ""
    assert [(c.name, c.arguments) for c in step.message.tool_calls] == [("read", {"path": "model.py"})]
    assert step.response_token_ids == target and step.prompt_token_ids == prompt
    # the recorded log-probs are those of a fresh forward pass over the whole sequence
    with torch.no_grad():
        logits = policy.model(input_ids=torch.tensor([prompt + target])).logits[0].float()
    ref = torch.log_softmax(logits[len(prompt) - 1:-1], dim=-1).gather(1, torch.tensor(target)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(step.response_logprobs), ref, atol=1e-4)

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "model.py").write_text("class Model: pass\n")
    with LocalSandbox().start(ws) as handle:
        ctx = ToolContext.from_sandbox(handle)
        out = call_tool({"read": ReadTool()}, ctx, step.message.tool_calls[0])
        assert not out.is_error and "class Model: pass" in out.text
