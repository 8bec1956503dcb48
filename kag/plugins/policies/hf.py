"""The ``hf`` policy: a transformers causal LM in-process, with its chat template and a tool-call parser.

The prompt is the tokenizer's chat template applied to the conversation and the tool schemas; the
reply is parsed for Hermes/Qwen-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
blocks. Token ids of the prompt and the response and the response's log-probs (under the sampling
distribution) are returned for RL. A block that does not parse becomes a call whose arguments
carry the raw text, so the agent loop tells the model what went wrong instead of stopping.
"""

from __future__ import annotations

from typing import Any

from kag.plugin import Message, PolicyError, PolicyStep, TOOL_CALL_RE, hookimpl, parse_tool_call_text, step_from_tokens

# the parser lives in kag.core.agent.policy (the text-only RL environments use it too)
parse_tool_calls = parse_tool_call_text


def messages_for_template(messages: list[Message]) -> list[dict[str, Any]]:
    """Chat-template messages: tool-call arguments as dicts (what Qwen/Hermes templates expect)."""
    out = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = [{"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
        if m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        if m.name is not None:
            d["name"] = m.name
        out.append(d)
    return out


class HFPolicy:
    """Options: model (path or hub id already on disk), device ("cpu", "cuda", "auto"), dtype,
    max_new_tokens, temperature (0 = greedy), top_p, seed."""

    name = "hf"

    def __init__(self, model: str | None = None, device: str = "auto", dtype: str = "auto",
                 max_new_tokens: int = 1024, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int | None = None, trust_remote_code: bool = False) -> None:
        if not model:
            raise PolicyError("the hf policy needs model=PATH (a local transformers model directory)")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        import transformers

        load_kw: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        if dtype not in ("auto", None):  # the keyword was torch_dtype before transformers 4.56
            major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
            load_kw["dtype" if (major, minor) >= (4, 56) else "torch_dtype"] = getattr(torch, dtype)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
            self.model = AutoModelForCausalLM.from_pretrained(model, **load_kw)
        except (OSError, ValueError) as exc:
            raise PolicyError(f"cannot load the hf model {model!r}: {exc}") from None
        if self.tokenizer.chat_template is None:
            raise PolicyError(f"the tokenizer of {model} has no chat_template; set one in tokenizer_config.json")
        self.model.to(device).eval()
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.generator = torch.Generator(device=device)
        if seed is not None:
            self.generator.manual_seed(int(seed))
        self.stop_ids = {i for i in [self.tokenizer.eos_token_id, self.tokenizer.pad_token_id] if i is not None}

    @staticmethod
    def check_available() -> str | None:
        from kag.plugin import missing

        return missing("transformers", "the hf policy")

    def prompt_ids(self, messages: list[Message], tools: list[dict[str, Any]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages_for_template(messages), tools=tools or None,
                                                 add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys") and "input_ids" in ids:  # newer transformers return a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def generate(self, prompt: list[int]) -> tuple[list[int], list[float], str]:
        """Sample token by token with a KV cache; log-probs are of the distribution sampled from."""
        torch = self.torch
        input_ids = torch.tensor([prompt], device=self.device)
        out_ids: list[int] = []
        logprobs: list[float] = []
        past = None
        finish = "length"
        with torch.no_grad():
            for _ in range(self.max_new_tokens):
                result = self.model(input_ids=input_ids, past_key_values=past, use_cache=True)
                past = result.past_key_values
                logits = result.logits[0, -1].float()
                if self.temperature > 0:
                    logp = torch.log_softmax(logits / self.temperature, dim=-1)
                    probs = logp.exp()
                    if self.top_p < 1.0:
                        sorted_p, order = probs.sort(descending=True)
                        keep = sorted_p.cumsum(0) - sorted_p < self.top_p
                        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
                        probs = probs / probs.sum()
                        logp = probs.clamp_min(1e-30).log()
                    token = int(torch.multinomial(probs, 1, generator=self.generator))
                else:
                    logp = torch.log_softmax(logits, dim=-1)
                    token = int(logits.argmax())
                out_ids.append(token)
                logprobs.append(float(logp[token]))
                if token in self.stop_ids:
                    finish = "stop"
                    break
                input_ids = torch.tensor([[token]], device=self.device)
        return out_ids, logprobs, finish

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyStep:
        prompt = self.prompt_ids(messages, tools)
        ids, logprobs, finish = self.generate(prompt)
        return step_from_tokens(self.tokenizer, self.stop_ids, prompt, ids, logprobs, finish)


@hookimpl
def kag_register_policies(register) -> None:
    register("hf", HFPolicy)
