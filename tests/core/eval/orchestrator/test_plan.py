"""An evaluation's plugin choices, resolved once before it starts (kag.core.eval.orchestrator.plan)."""

from __future__ import annotations

import pytest

from kag.core.eval.orchestrator.evaluate import EvalOptions, evaluate
from kag.core.eval.orchestrator.plan import resolve
from kag.core.plugins import PluginError, Plugins
from kag.core.records import Solution, Task

TASK = Task(name="t", source="file", code="import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x\ndef get_inputs():\n    return [torch.ones(2)]\ndef get_init_inputs():\n    return []\n")


def test_every_choice_is_made_once_up_front():
    plan = resolve(EvalOptions(backend="cpu", guards=("no-tampering", "precision"), tolerance="strict"), Plugins())
    assert plan.device == "cpu" and plan.tolerance == "strict" and plan.guard_options["tolerance"] == "strict"
    assert [name for name, _ in plan.guards] == ["no-tampering", "precision"]
    assert plan.runtime_guards() == ["no-tampering"]  # the one that also judges the calls
    assert plan.baselines == [("eager", "default"), ("compile", "default")]
    assert type(plan.reward).__name__ == "MilestoneReward"
    assert resolve(EvalOptions(backend="cpu", do_correctness=False), Plugins()).reward is None
    assert plan.backend() is plan.backend()  # made once, when a build needs it


@pytest.mark.parametrize("bad, named", [({"reward": "nope"}, "reward 'nope'"), ({"baselines": ("eager", "nope")},
                                        "baseline 'nope'"), ({"tolerance": "nope"}, "tolerance 'nope'")])
def test_a_misnamed_plugin_fails_before_anything_is_built(bad, named, tmp_path):
    solution = Solution(model_new="this is not python")  # never read: the plan fails first
    with pytest.raises(PluginError, match=named):
        evaluate(TASK, solution, EvalOptions(backend="cpu", cache_dir=str(tmp_path), **bad), Plugins())


def test_a_guard_that_refuses_its_options_names_them():
    with pytest.raises(ValueError, match="rejects the guard options"):
        resolve(EvalOptions(backend="cpu", guard_options={"no_such_option": 1}), Plugins())
