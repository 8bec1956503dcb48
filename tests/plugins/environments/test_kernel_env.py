"""The CUDA-kernel RL environments on the CPU backend, with the real evaluator, sandbox and tools."""

import json
import random
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kag.cli.main import cli
from kag.core.plugins import Plugins
from kag.plugins.environments.kernel_env import AnswerFormatError, parse_solution_blocks, skill_summary

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sigmoid" / "cpu"
FAST_EVAL = {"backend": "cpu", "num_timed": 3, "warmup": 1}


@pytest.fixture(scope="module")
def plugins():
    return Plugins(load_entrypoints=False)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A local dataset of one task: the CPU twin of KernelBench's sigmoid, as sigmoid.py."""
    folder = tmp_path_factory.mktemp("tasks")
    shutil.copy(EXAMPLE / "model.py", folder / "sigmoid.py")
    return f"local:{folder}"


def fenced_answer() -> str:
    """The example's solution written the way the single-turn prompt asks for it."""
    text = "Fused sigmoid kernel.\n\n```python model_new.py\n" + (EXAMPLE / "model_new.py").read_text() + "```\n"
    for file in sorted((EXAMPLE / "kernels").iterdir()):
        text += f"\n```cpp kernels/{file.name}\n{file.read_text()}```\n"
    return text


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_fenced_blocks_are_parsed_strictly():
    solution = parse_solution_blocks(fenced_answer())
    assert "sigmoid_forward" in solution.model_new
    assert sorted(solution.kernels) == ["sigmoid.cpp", "sigmoid_binding.cpp"]
    assert solution.kernels["sigmoid.cpp"] == (EXAMPLE / "kernels" / "sigmoid.cpp").read_text()
    ok = parse_solution_blocks("```model_new.py\nx = 1\n```\n````cuda ./kernels/a/b.cu\n```inner```\n````\n")
    assert ok.model_new == "x = 1\n" and ok.kernels == {"a/b.cu": "```inner```\n"}
    bad = {
        "no fenced files": "just prose",
        "labelled with its path": "```python\nx = 1\n```",
        "'model.py' is not a solution file": "```python model.py\nx\n```",
        "'kernels/../x.cu' is not": "```cuda kernels/../x.cu\nx\n```",
        "'utils/compile.sh' is not": "```bash utils/compile.sh\nx\n```",
        "'kernels/notes.txt' is not": "```text kernels/notes.txt\nx\n```",
        "appears twice": "```python model_new.py\na\n```\n```python model_new.py\nb\n```",
        "never closed": "```python model_new.py\nclass ModelNew: ...",
        "no model_new.py block": "```cuda kernels/a.cu\nx\n```",
    }
    for why, text in bad.items():
        with pytest.raises(AnswerFormatError, match=why):
            parse_solution_blocks(text)


def test_skill_summary_drops_the_tool_workflow():
    cpu, cuda = skill_summary("cpu"), skill_summary("cuda")
    assert "REGISTER_BINDING" in cuda and "## Forbidden" in cuda and "## How to write the kernels" in cuda
    assert "utils/profiling.py`. Before" not in cuda and "**Verify:**" not in cuda
    assert "## CPU backend" in cpu and "## CPU backend" not in cuda


@pytest.mark.slow
def test_single_turn_scores_a_correct_answer_and_rejects_garbage(plugins, dataset):
    env = plugins.create("environment", "kernel-single", dataset=dataset, plugins=plugins, **FAST_EVAL)
    assert env.sample_tasks(3, random.Random(0)) == ["sigmoid"] * 3
    prompt = env.reset("sigmoid")
    assert [m.role for m in prompt] == ["system", "user"]
    assert "## Forbidden" in prompt[0].content and "torch.sigmoid(x)" in prompt[1].content
    assert "```python model_new.py" in prompt[1].content and "kernels/foo.cpp" in prompt[1].content

    obs, reward, done = result = env.step(fenced_answer())
    assert done and obs is None and reward >= 1, env.last_result
    assert result.info["right"] and result.info["compiled"] and env.last_result.times_ms.get("candidate")
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("again")

    env.reset("sigmoid")
    garbage = env.step("q7x( k2 model_new ``")
    assert garbage.done and garbage.reward == -1.0
    assert garbage.info["invalid_action"] and "no fenced files" in garbage.info["reason"]
    env.reset("sigmoid")  # a scored failure says why too
    broken = env.step(fenced_answer().replace("torch::Tensor", "torch::Tensr", 1))
    assert broken.reward == -1.0 and broken.info["error_kind"] == "build"
    assert "build failed" in broken.info["reason"] and "invalid_action" not in broken.info
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        env.reset("nope")


def test_environment_options_errors_say_what_to_fix(plugins, tmp_path):
    with pytest.raises(ValueError, match="set dataset ="):
        plugins.create("environment", "kernel-single")
    with pytest.raises(ValueError, match="backend must be auto or one of cpu, cuda, nvrtc"):
        plugins.create("environment", "kernel-single", dataset=f"local:{EXAMPLE / 'model.py'}", backend="gpu",
                       plugins=plugins)  # the built-ins' backends: an installed plugin's would be listed too
    (tmp_path / "broken.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="has no usable task"):
        plugins.create("environment", "kernel-single", dataset=f"local:{tmp_path}")


@pytest.mark.slow
def test_agentic_episode_writes_compiles_verifies_and_is_rewarded(plugins, dataset):
    env = plugins.create("environment", "kernel-agentic", dataset=dataset, plugins=plugins, max_turns=10,
                         **FAST_EVAL)
    prompt = env.reset("sigmoid")
    workspace = env.episode.ctx.root
    assert "<tool_call>" in prompt[0].content and '"name":"bash"' in prompt[0].content
    assert "utils/verification.py" in prompt[0].content and "torch.sigmoid" in prompt[1].content

    read = env.step("Let me look.\n" + tool_call("read", path="model_new.py"))
    assert not read.done and read.reward == 0.0 and "invalid_action" not in read.info
    assert read.observation[0].role == "tool" and "ModelNew" in read.observation[0].content

    writes = "".join(tool_call("write", path=f"kernels/{f.name}", content=f.read_text())
                     for f in sorted((EXAMPLE / "kernels").iterdir()))
    writes += tool_call("write", path="model_new.py", content=(EXAMPLE / "model_new.py").read_text())
    wrote = env.step(writes)
    assert wrote.info["tool_calls"] == 3 and wrote.info["tool_errors"] == 0, wrote.observation

    compiled = env.step(tool_call("bash", command="bash utils/compile.sh"))
    assert "ok" in compiled.observation[0].content and compiled.info["tool_errors"] == 0, compiled.observation
    verified = env.step(tool_call("bash", command="python3 utils/verification.py"))
    assert "PASS" in verified.observation[0].content and verified.info["evaluations"] == 1, verified.observation

    final = env.step("The kernel is correct; done.")
    assert final.done and final.reward >= 1, env.last_result
    assert final.info["stop_reason"] == "model_stopped" and final.info["right"] and final.info["turns"] == 5
    assert env.last_result.times_ms.get("candidate")  # re-scored with timing at the end
    assert env.episode is None and not workspace.exists()  # sandbox and files cleaned up
    with pytest.raises(RuntimeError):
        env.step(tool_call("bash", command="true"))


@pytest.mark.slow
def test_agentic_malformed_call_is_an_observation_and_the_budget_ends_the_episode(plugins, dataset):
    env = plugins.create("environment", "kernel-agentic", dataset=dataset, plugins=plugins, max_turns=2,
                         **FAST_EVAL)
    env.reset("sigmoid")
    workspace = env.episode.ctx.root
    bad = env.step('<tool_call>{"name": "read", "arguments": {"path": </tool_call>')
    assert not bad.done and bad.info["invalid_action"] and "unparseable tool call" in bad.info["reason"]
    assert "not valid JSON" in bad.observation[0].content
    unknown = env.step(tool_call("launch_rocket") + tool_call("bash", command="echo still here"))
    assert unknown.done and unknown.info["stop_reason"] == "turn_budget"
    assert unknown.info["invalid_action"] and "unknown tool 'launch_rocket'" in unknown.info["reason"]
    assert "still here" in unknown.observation[1].content
    # the untouched starter model_new.py is scored by the evaluator and fails
    assert unknown.reward == -1.0 and not unknown.info["right"]
    assert not workspace.exists()
    env.reset("sigmoid")  # a new episode on the same slot, then close() mid-episode
    workspace = env.episode.ctx.root
    env.close()
    assert not workspace.exists() and env.episode is None


def test_agentic_links_are_refused_and_leave_an_unscorable_workspace(plugins, dataset, tmp_path):
    """The environment's episodes use the same trusted evaluator: a link out of the workspace is
    refused by name, never read, and the episode ends with the failure reward, not a crash."""
    secret = tmp_path / "secret.cpp"
    secret.write_text("#error host secret 91d0\n")
    env = plugins.create("environment", "kernel-agentic", dataset=dataset, plugins=plugins, max_turns=3,
                         **FAST_EVAL)
    env.reset("sigmoid")
    workspace = env.episode.ctx.root
    linked = env.step(tool_call("bash", command=f"ln -s {secret} kernels/x.cpp && bash utils/compile.sh; "
                                                 f"python3 utils/verification.py"))
    replies = linked.observation[0].content
    assert replies.count("refused: kernels/x.cpp is a symbolic link: links are not allowed") == 2, replies
    assert "host secret" not in replies and linked.info["evaluations"] == 0
    read = env.step(tool_call("read", path="kernels/x.cpp"))
    assert "kernels/x.cpp is a symbolic link" in read.observation[0].content
    assert "host secret" not in read.observation[0].content
    final = env.step("done")
    assert final.done and final.reward == -1.0 and "kernels/x.cpp is a symbolic link" in final.info["reason"]
    assert not workspace.exists()


@pytest.mark.slow
def test_kag_train_warmup_runs_on_kernel_single(dataset, tmp_path):
    """The tiny model's answers are never valid solutions: reward -1, but every part runs."""
    out = tmp_path / "warmup"
    config = tmp_path / "train.toml"
    config.write_text(
        '[train]\nmodel = "tiny"\nenvironment = "kernel-single"\nsteps = 2\nepisodes_per_step = 2\n'
        'mini_batch_size = 2\nmicro_batch_size = 2\nmax_new_tokens = 16\ntensorboard = false\n'
        f'output_dir = "{out}"\n\n[environments.kernel-single]\ndataset = "{dataset}"\nbackend = "cpu"\n'
        'num_timed = 3\nwarmup = 1\n')
    start = time.perf_counter()
    res = CliRunner().invoke(cli, ["train", "warmup", "--config", str(config)])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output[res.output.index("{"):])
    assert summary["step"] == 2 and summary["reward_mean"] == -1.0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["reward_mean"] == -1.0 for r in rows)
    assert all(r["right_frac"] == 0.0 and r["traj_tokens"] > 1000 for r in rows)
    assert all(r["pass_frac"] == 0.0 and r["faster_than_compile_frac"] == 0.0 for r in rows)  # unparsed: a fail
    res = CliRunner().invoke(cli, ["train", "report", str(tmp_path)])  # the run's page has the kernel rates
    assert res.exit_code == 0, res.output
    assert "| warmup | 0.000 -> 0.000 | 0.000 -> 0.000 |" in (tmp_path / "report.md").read_text()
    assert (out / "checkpoint" / "actor" / "config.json").is_file()
    print(f"kag train warmup on kernel-single: 2 steps in {time.perf_counter() - start:.1f}s")
