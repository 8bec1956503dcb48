"""Re-checks on a secret sample of a large output's elements (kag.core.eval.judge.output_samples)."""

from __future__ import annotations

import math

import attrs
import torch

from kag.core.eval.judge.output_samples import SamplePlan, element_offsets, verify_sampled
from kag.core.eval.judge.reference64 import Float64Reference
from kag.core.plugins import Plugins


def test_offsets_follow_any_layout():
    base = torch.arange(6 * 5 * 4, dtype=torch.float32).reshape(6, 5, 4)
    for view in (base, base.transpose(0, 2), base[:, ::2], base.permute(1, 2, 0)):
        positions = torch.randint(0, view.numel(), (200,))
        storage = torch.as_tensor(view.untyped_storage(), dtype=torch.uint8).view(torch.float32)
        got = storage[view.storage_offset() + element_offsets(positions, tuple(view.shape), view.stride())]
        assert torch.equal(got, view.reshape(-1)[positions])


def test_a_plan_samples_each_output_within_its_budget():
    template = (torch.zeros(1000, 1000), torch.zeros(10), torch.zeros(0))
    plan = SamplePlan(template, "cpu", budget_bytes=400_040)
    assert plan.share < 0.11
    assert [None if p is None else p.numel() for p in plan.positions] == [plan.positions[0].numel(), math.ceil(plan.share * 10), None]
    assert 99_000 < plan.elements() < 101_100
    assert all(int(p.max()) < t.numel() for p, t in zip(plan.positions, template) if p is not None)
    picked = plan.pick((torch.ones(1000, 1000), torch.ones(10), torch.zeros(0)))
    assert picked[0].shape == plan.positions[0].shape and picked[2].numel() == 0
    again = SamplePlan(template, "cpu", budget_bytes=400_040)
    assert not torch.equal(again.positions[0], plan.positions[0])  # secret: drawn afresh


@attrs.define
class FakeJudge:
    """What verify_sampled needs of the judge: the reference, its inputs, the tolerance, notes."""

    model: object
    tolerance: object
    ref64: object = None
    report: object = attrs.field(factory=lambda: type("R", (), {"notes": []})())

    def make_inputs(self, seed: int) -> list:
        gen = torch.Generator().manual_seed(seed)
        return [torch.randn(512, 512, generator=gen)]

    def reference_on(self, seed: int) -> torch.Tensor:
        return self.model(*self.make_inputs(seed))


def judge() -> FakeJudge:
    model = torch.nn.ReLU()
    j = FakeJudge(model=model, tolerance=Plugins().create("tolerance", "cuda-agent").tolerance)
    j.ref64 = Float64Reference(model, j.make_inputs)
    return j


def test_right_values_pass_and_wrong_ones_fail_at_the_secret_positions():
    j = judge()
    plan = SamplePlan(torch.zeros(512, 512), "cpu", budget_bytes=64 << 10)
    full = torch.relu(j.make_inputs(7)[0])
    assert verify_sampled(j, plan, plan.pick(full), 7, "a call") is None
    assert verify_sampled(j, plan, plan.pick(full), 8, "a call") is not None  # another call's inputs
    skipped = full.clone()
    skipped[256:] = 0.5  # half the rows never written
    assert verify_sampled(j, plan, plan.pick(skipped), 7, "a call") is not None
    assert verify_sampled(j, plan, "its output was not where it said", 7, "a call") == "its output was not where it said"
