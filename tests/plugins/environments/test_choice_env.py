"""``kernel-choice``: the letters, the prompts, bad folders, and every variant's real verdict on the CPU
backend (the learning curve itself: tests/plugins/algorithms/test_kernel_learning.py)."""

import json
import shutil
import string
from pathlib import Path

import pytest

from kag.core.plugins import Plugins
from kag.plugins.environments.choice_env import letter_order

CHOICES = Path(__file__).resolve().parents[3] / "examples" / "train" / "kernel_choice"
FAST_EVAL = {"backend": "cpu", "num_timed": 5, "warmup": 1}
# what each shipped variant must get from the judge: (reward, error_kind)
EXPECTED = {"fast": (3.0, None), "slow": (1.0, None), "wrong": (-1.0, "mismatch"), "broken": (-1.0, "build"),
            "fallback": (-1.0, "guard")}


@pytest.fixture(scope="module")
def plugins():
    return Plugins(load_entrypoints=False)


def make(plugins, **options):
    return plugins.create("environment", "kernel-choice", plugins=plugins, **{"path": str(CHOICES), **FAST_EVAL, **options})


def test_letters_are_a_fixed_permutation_per_task_and_seed(plugins):
    env = make(plugins)
    assert sorted(env.tasks) == ["row_max", "row_min", "row_sum"]
    for task in env.tasks:
        order = env.letters[task]
        assert sorted(order) == sorted(EXPECTED) and order == letter_order(task, list(EXPECTED), 0)
    # the right letter is not the same for every task (else the policy need not read the task)
    fast = {next(letter for letter, name in env.options_of(t).items() if name == "fast") for t in env.tasks}
    assert len(fast) > 1
    assert any(letter_order(t, list(EXPECTED), 1) != env.letters[t] for t in env.tasks)


def test_prompts_name_the_task_or_show_every_option(plugins):
    env = make(plugins)
    (msg,) = env.reset("row_sum")
    assert msg.content == "task row_sum. options a b c d e. answer one letter."
    coded = make(plugins, prompt="code")
    (msg,) = coded.reset("row_sum")
    assert "torch.cumsum(x, dim=1)[:, -1]" in msg.content and msg.content.count("# option ") == 5
    for letter, name in coded.options_of("row_sum").items():
        part = msg.content.split(f"# option {letter}\n")[1]
        assert part.startswith("```python model_new.py\n") and "kernels/row_sum_binding.cpp" in part
        assert (CHOICES / "row_sum" / "variants" / name / "kernels" / "row_sum.cpp").read_text() in part


def test_an_answer_that_is_no_option_is_an_invalid_action_and_not_evaluated(plugins):
    env = make(plugins)
    env.reset("row_max")
    result = env.step("z")
    assert result.reward == -1.0 and result.done and result.info["invalid_action"]
    assert "expected one of a b c d e, got 'z'" in result.info["reason"]
    assert env.last_result.error_kind != "mismatch" and not env.last_result.compiled
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("a")
    for reply in ("Answer: c", "b is fastest", "ab", ""):  # a letter inside prose is no pick
        env.reset("row_max")
        assert env.step(reply).info["invalid_action"], reply


def test_bad_folders_get_an_error_that_names_them(plugins, tmp_path):
    with pytest.raises(ValueError, match="set path ="):
        plugins.create("environment", "kernel-choice", plugins=plugins, backend="cpu")
    with pytest.raises(ValueError, match=f"{tmp_path / 'nope'} is not a folder"):
        make(plugins, path=str(tmp_path / "nope"))
    (tmp_path / "t").mkdir()
    with pytest.raises(ValueError, match=f"{tmp_path / 't'} needs model.py and variants/NAME/"):
        make(plugins, path=str(tmp_path))
    shutil.copytree(CHOICES / "row_sum", tmp_path / "t", dirs_exist_ok=True)
    for v in ("slow", "wrong", "broken", "fallback"):
        shutil.rmtree(tmp_path / "t" / "variants" / v)
    with pytest.raises(ValueError, match="holds 1 variants; give 2 to 26"):
        make(plugins, path=str(tmp_path))
    with pytest.raises(ValueError, match="prompt must be one of names, code"):
        make(plugins, prompt="full")


@pytest.mark.slow
@pytest.mark.parametrize("task", ["row_max", "row_sum"])
def test_every_variant_gets_its_verdict_from_the_judge(plugins, task):
    """The learning curve is only meaningful if the judge tells the variants apart: fast beats both
    baselines, slow is correct and slower, the others fail, each for its own reason."""
    env = make(plugins)
    got = {}
    for letter, name in env.options_of(task).items():
        env.reset(task)
        result = env.step(letter + "\n")
        got[name] = (result.reward, env.last_result.error_kind)
        assert result.info["variant"] == name and result.info["choice"] == letter
    assert got == EXPECTED, json.dumps(got)


def test_every_shipped_variant_folder_is_a_solution():
    for task in ("row_max", "row_min", "row_sum"):
        names = sorted(p.name for p in (CHOICES / task / "variants").iterdir())
        assert names == sorted(EXPECTED)
        for name in names:
            folder = CHOICES / task / "variants" / name
            assert (folder / "model_new.py").is_file()
            assert sorted(p.name for p in (folder / "kernels").iterdir()) == [f"{task}.cpp", f"{task}_binding.cpp"]
    assert set(string.ascii_lowercase[:5]) == set(Plugins(load_entrypoints=False).create(
        "environment", "kernel-choice", path=str(CHOICES), backend="cpu").options_of("row_min"))
