"""kag.reward: verl, TRL and OpenRLHF get kag's rewards, each called through the framework's own
code (verl's reward-manager loader, TRL's GRPOTrainer, OpenRLHF's reward_func file loader) on CPU
tasks, so every reward is a real verdict of the trusted evaluator."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import kag
import kag.reward

ROOT = Path(__file__).resolve().parents[1]
RELU = ROOT / "examples" / "relu"
TASK = str(RELU / "cpu" / "model.py")
QUICK = {"backend": "cpu", "num_checks": 2, "num_timed": 5, "warmup": 1}


def fenced_answer() -> str:
    """examples/relu/cpu in kag's answer format, after some chatter, as a model would write it."""
    files = [("python model_new.py", (RELU / "cpu" / "model_new.py").read_text())]
    files += [(f"cpp kernels/{p.name}", p.read_text()) for p in sorted((RELU / "cpu" / "kernels").iterdir())]
    return "Here is my solution.\n" + "".join(f"```{label}\n{text}```\n" for label, text in files)


def single_file_answer() -> str:
    """examples/relu/kernelbench/cpu as KernelBench's prompt asks for it: one ```python block."""
    return "```python\n" + (RELU / "kernelbench" / "cpu" / "model_new.py").read_text() + "```\n"


def byte_tokenizer():
    """A byte-level tokenizer built here (no download) that round-trips any text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(["<pad>", "<|end|>", *sorted(pre_tokenizers.ByteLevel.alphabet())])}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<|end|>")


# ---------------------------------------------------------------------------------------------
# fast: what the adapters do before any evaluation
def test_trl_reward_names_the_missing_task_column():
    with pytest.raises(ValueError, match="no 'task' column.*'problem'"):
        kag.reward.TRLReward(**QUICK)(prompts=["p"], completions=["c"], problem=["x"])


def test_unreadable_completions_get_the_failure_reward_from_every_adapter(monkeypatch):
    monkeypatch.setenv(kag.reward.OPTIONS_ENV, '{"backend": "cpu"}')
    assert kag.reward.compute_score("kag", "no code here", TASK, {})["score"] == -1.0
    assert kag.reward.TRLReward()(prompts=["p"], completions=[[{"role": "assistant", "content": "no"}]],
                                  task=[TASK]) == [-1.0]
    out = kag.reward.openrlhf_rewards(["PROMPT ```python model.py\nx\n``` answer"], ["PROMPT ```python model.py\nx\n```"],
                                      [TASK])
    assert out["rewards"].tolist() == [-1.0] and out["scores"].tolist() == [0.0]


def test_task_code_in_the_dataset_is_a_task(monkeypatch):
    code = (RELU / "cpu" / "model.py").read_text()
    task = kag.reward.task_from(code)
    assert task.code == code and task.name.startswith("task-")
    monkeypatch.setenv(kag.reward.OPTIONS_ENV, "[1]")
    with pytest.raises(ValueError, match="must be a JSON object"):
        kag.reward.env_options()


# ---------------------------------------------------------------------------------------------
# slow: the frameworks' own code paths, real evaluations
@pytest.mark.slow
def test_verl_reward_manager_loads_compute_score_and_gets_kag_rewards():
    pytest.importorskip("verl", reason="verl is not installed (pip install --no-deps verl tensordict omegaconf)")
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    config = OmegaConf.create({"reward": {
        "custom_reward_function": {"path": kag.reward.__file__, "name": "compute_score", "reward_kwargs": QUICK},
        "reward_manager": {"source": "register", "name": "naive"}}})
    tok = byte_tokenizer()
    manager = load_reward_manager(config, tok)
    prompt = tok("Write a faster ReLU.", return_tensors="pt")["input_ids"]
    response = tok(fenced_answer() + "<|end|>", return_tensors="pt")["input_ids"]
    data = DataProto.from_dict(
        tensors={"prompts": prompt, "responses": response,
                 "attention_mask": torch.ones(1, prompt.shape[1] + response.shape[1], dtype=torch.long)},
        non_tensors={"data_source": np.array(["kernelbench"], dtype=object),
                     "reward_model": np.array([{"ground_truth": TASK}], dtype=object)})
    out = manager.loop.run_until_complete(manager.run_single(data))
    assert out["reward_score"] >= 1, out
    assert out["reward_extra_info"]["correct"] == 1.0 and out["reward_extra_info"]["speedup_vs_eager"] > 0


@pytest.mark.slow
def test_trl_grpo_trainer_calls_the_kag_reward(tmp_path):
    pytest.importorskip("trl", reason="trl is not installed (pip install trl)")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from kag.plugins.algorithms.ppo.tiny import make_tiny_model

    tok = byte_tokenizer()
    model = make_tiny_model(len(tok))
    model.config.pad_token_id, model.config.eos_token_id = tok.pad_token_id, tok.eos_token_id
    dataset = Dataset.from_dict({"prompt": ["Write a faster ReLU."] * 2, "task": [TASK] * 2})
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=8, max_steps=1, use_cpu=True, report_to=[], logging_steps=1,
                      save_strategy="no", bf16=False)
    reward = kag.reward.TRLReward(**QUICK)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=dataset,
                          processing_class=tok)
    # one real step: the untrained model's 8 tokens hold no solution, so kag gives the failure reward
    trainer.train()
    rewards = [h for h in trainer.state.log_history if "rewards/kag/mean" in h]
    assert rewards and rewards[0]["rewards/kag/mean"] == -1.0
    # the trainer's own reward path on a solution in each format
    inputs = [{"prompt": "Write a faster ReLU.", "task": TASK}] * 2
    completions = [fenced_answer(), single_file_answer()]
    out = trainer._calculate_rewards(inputs, [i["prompt"] for i in inputs], completions,
                                     [tok(c)["input_ids"] for c in completions])
    assert out.shape == (2, 1) and (out >= 1).all(), out


@pytest.mark.slow
def test_openrlhf_loads_the_reward_file_and_gets_kag_rewards(monkeypatch):
    pytest.importorskip("openrlhf", reason="openrlhf is not installed")
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    monkeypatch.setenv(kag.reward.OPTIONS_ENV, '{"backend": "cpu", "num_checks": 2, "num_timed": 5, "warmup": 1}')
    executor = SingleTurnAgentExecutor(remote_rm_url=kag.reward.OPENRLHF_FILE)
    prompt = "<|user|>Write a faster ReLU; answer with ```python model.py``` style blocks.<|assistant|>"
    out = asyncio.run(executor._fetch_rewards_via_func([prompt + fenced_answer()], [prompt], [TASK]))
    info = out[0]
    assert info["rewards"].tolist()[0] >= 1 and info["scores"].tolist() == [1.0]
    assert info["extra_logs"]["speedup_vs_compile"].tolist()[0] > 0
