"""Real chat formats: the token stream an episode builds (prompt, sampled turns, observations) is exactly
what the model's chat template renders for the same conversation, for the tiny Llama format and for
Qwen2.5's (newline after ``<|im_end|>``, default system turn, tool results in a user turn); and the
recipe written for Qwen2.5-Coder-7B-Instruct runs end to end with a tiny model of that architecture."""

import tomllib
from pathlib import Path

import pytest

from kag.core.plugins import Plugins
from kag.plugins.algorithms.ppo.models import ChatFormat, load_actor, load_tokenizer
from kag.plugins.algorithms.ppo.tiny import make_tiny_tokenizer

REPO = Path(__file__).resolve().parents[3]
RECIPE = REPO / "examples" / "train" / "recipe_kernels.toml"


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_an_episodes_tokens_are_the_templates_rendering_of_it(family):
    tok = make_tiny_tokenizer(family)
    chat = ChatFormat(tok)
    eos = tok.eos_token_id
    conversation = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "task: relu"}]
    context = chat.prompt_ids(conversation)
    for reply, tool_outputs in (("call a", ["out 1", "out 2"]), ("call b", ["out 3"]), ("done", [])):
        sampled = tok.encode(reply, add_special_tokens=False) + [eos]  # what the model samples, eos last
        context += sampled
        conversation.append({"role": "assistant", "content": reply})
        if tool_outputs:
            obs = [{"role": "tool", "content": text} for text in tool_outputs]
            context += chat.continuation_ids(obs)
            conversation += obs
    rendered = tok.encode(tok.apply_chat_template(conversation, tokenize=False), add_special_tokens=False)
    # the whole stream is the template's text, up to what the template writes after the last eos
    assert context == rendered[:len(context)]
    assert tok.decode(rendered[len(context):]) == ("\n" if family == "qwen2" else "")


def test_a_reply_cut_before_its_eos_gets_the_eos_from_the_continuation():
    tok = make_tiny_tokenizer("qwen2")
    chat = ChatFormat(tok)
    cont = chat.continuation_ids([{"role": "tool", "content": "x"}], after_eos=False)
    assert cont[0] == tok.eos_token_id and tok.decode(cont[1:]).startswith("\n<|im_start|>user\n<tool_response>")


def test_tiny_qwen2_saves_and_loads_like_a_hub_model(tmp_path):
    model, tok = load_actor("tiny-qwen2", seed=1)
    assert type(model).__name__ == "Qwen2ForCausalLM" and tok.eos_token == "<|im_end|>"
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    again, tok2 = load_actor(str(tmp_path))
    assert type(again).__name__ == "Qwen2ForCausalLM" and tok2.chat_template == tok.chat_template
    assert load_tokenizer("tiny-qwen2").get_vocab() == tok.get_vocab()


@pytest.mark.slow
def test_the_qwen_recipe_runs_end_to_end_with_a_tiny_qwen2(tmp_path):
    """Every stage of recipe_kernels.toml with model = "tiny-qwen2" on the CPU, on the CPU ReLU task (a
    random model never writes a kernel: every reward is -1, and RFT keeps everything here)."""
    from kag.plugins.algorithms.ppo.recipe import run_recipe

    data = tomllib.loads(RECIPE.read_text())
    small = {"model": "tiny-qwen2", "device": "cpu", "engine": "torch", "max_new_tokens": 24, "max_context": 4096,
             "episodes_per_step": 2, "mini_batch_size": 2, "micro_batch_size": 1, "steps": 1, "num_episodes": 2,
             "rft_min_reward": -10.0, "rft_reject_invalid": False, "rft_max_identical_repeats": 99,
             "rft_min_loop_repeats": 99, "tensorboard": False}
    data["train"].update(small)
    for stage in ("warmup", "collect", "value-pretrain", "agentic"):
        data["train"][stage] = {k: v for k, v in data["train"].get(stage, {}).items() if k == "environment"}
    data["train"]["collect"]["max_turns"] = data["train"]["agentic"]["max_turns"] = 2
    task = f"local:{REPO / 'examples' / 'relu' / 'cpu' / 'model.py'}"
    for env in ("kernel-single", "kernel-agentic"):
        data["environments"][env].update(dataset=task, backend="cpu", num_timed=3, warmup=1)
        data["environments"][env].pop("level", None)
    data["environments"]["kernel-agentic"]["max_turns"] = 2
    out = run_recipe(data, str(RECIPE), Plugins(load_entrypoints=False), echo=lambda _: None,
                     run_dir=str(tmp_path / "run"))
    assert list(out["stages"]) == ["warmup", "collect", "rft", "value-pretrain", "agentic"]
    assert Path(out["report"]).is_file()
    actor = tmp_path / "run" / "agentic" / "checkpoint" / "actor"
    assert "<|im_start|>" in (actor / "chat_template.jinja").read_text()
