"""Decontamination: a reduction's label says which dimensions it reduces (kag.core.data.opaxes), so the
norms that decompose to the same ops (LayerNorm, GroupNorm, InstanceNorm, BatchNorm) are different
graphs, while views, permutes and renames of one of them are still the same graph."""

from __future__ import annotations

import pytest

from kag.core.data.opgraph import trace
from kag.core.plugins import Plugins


def task(forward: str, init: str = "pass", inputs: str = "torch.rand(16, 32)") -> str:
    return ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
            f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        {init}\n\n"
            f"    def forward(self, x):\n        return {forward}\n\n"
            f"def get_inputs():\n    return [{inputs}]\n\ndef get_init_inputs():\n    return []\n")


# a KernelBench-style fusion: Gemm -> GroupNorm -> LeakyReLU -> x + x (level2/62's shape, small)
GEMM_GN = task("(lambda y: y + y)(F.leaky_relu(self.gn(self.fc(x)), 0.01))",
               "self.fc = nn.Linear(32, 64)\n        self.gn = nn.GroupNorm(8, 64)")


def norms(x: str = "x") -> dict[str, str]:
    inp = "torch.rand(4, 8, 6, 6)"
    return {"layer": task(f"self.n({x})", "self.n = nn.LayerNorm((8, 6, 6))", inp),
            "group": task(f"self.n({x})", "self.n = nn.GroupNorm(2, 8)", inp),
            "instance": task(f"self.n({x})", "self.n = nn.InstanceNorm2d(8)", inp),
            "batch": task(f"self.n({x})", "self.n = nn.BatchNorm2d(8)", inp)}


def test_norms_over_other_dimensions_are_other_graphs():
    """Decomposed, all four are var/mean/sub/sqrt/div (and the affine mul/add): only the reduced
    dimensions tell them apart."""
    graphs = {k: trace(c) for k, c in norms().items()}
    assert len({g.digest() for g in graphs.values()}) == 4
    assert {k: sorted(lab for lab in g.labels if lab.startswith("mean")) for k, g in graphs.items()} == {
        "layer": ["mean@KR"], "group": ["mean@KSR"], "instance": ["mean@KR"], "batch": ["mean@RKR"]}


@pytest.mark.parametrize("flat, row", [
    ("torch.log_softmax(x.flatten(1), 1)", "torch.log_softmax(x, 1)"),
    ("x.flatten(1).sum(1)", "x.sum(1)"),
    ("x.sum((2, 3))", "x.sum(1)"),
])
def test_reducing_neighbouring_dimensions_is_reducing_their_flattened_block(flat, row):
    """A composed ``Flatten -> LogSoftmax`` is KernelBench's row log-softmax on a view: the same graph."""
    four = trace(task(flat, inputs="torch.rand(4, 8, 6, 6)"))
    assert four.digest() == trace(task(row, inputs="torch.rand(4, 288)")).digest()


def test_a_group_norm_of_one_group_is_a_layer_norm():
    ln = task("self.n(x)", "self.n = nn.LayerNorm(32)")
    gn1 = task("self.n(x)", "self.n = nn.GroupNorm(1, 32)")
    assert trace(ln).multiset() == trace(gn1).multiset()


@pytest.mark.parametrize("a, b", [
    ("x.mean(-1)", "x.reshape(-1, 32).mean(-1).view(16)"),  # a view of the same elements
    ("torch.softmax(x, 0)", "torch.softmax(x.t(), 1).t()"),  # a permuted view
    ("x.sum(dim=1)", "torch.sum(x, -1)"),
])
def test_views_do_not_change_the_reduced_dimensions(a, b):
    assert trace(task(a)).digest() == trace(task(b)).digest()


@pytest.mark.parametrize("a, b", [
    ("torch.softmax(x, 0)", "torch.softmax(x, 1)"),
    ("x.sum(dim=0)", "x.sum(dim=1)"),
    ("x.cumsum(0)", "x.cumsum(1)"),
])
def test_another_reduced_dimension_is_another_graph(a, b):
    assert trace(task(a)).digest() != trace(task(b)).digest()


def test_a_layer_norm_near_miss_of_a_group_norm_fusion_is_kept():
    """Gemm -> LayerNorm -> LeakyReLU -> x + x is another function than level2/62's GroupNorm: before the
    reduced dimensions were labelled it was that task's exact graph (score 1.0)."""
    d = Plugins().create("filter", "decontam", threshold=0.9, numeric=False)
    d.add_reference([("level2/62_Matmul_GroupNorm_LeakyReLU_Sum", GEMM_GN)])
    near = task("(lambda y: y + y)(F.leaky_relu(self.ln(self.fc(x)), 0.01))",
                "self.fc = nn.Linear(32, 64)\n        self.ln = nn.LayerNorm(64)")
    v = d.judge(near)
    assert v.graph < 0.9 and d.keep(v.score), v


def test_a_renamed_or_written_out_group_norm_copy_is_still_dropped():
    d = Plugins().create("filter", "decontam", threshold=0.9, numeric=False)
    d.add_reference([("level2/62_Matmul_GroupNorm_LeakyReLU_Sum", GEMM_GN)])
    renamed = task("(lambda z: z + z)(F.leaky_relu(self.norm(self.proj(x)), negative_slope=0.01))",
                   "self.proj = nn.Linear(32, 64)\n        self.norm = nn.GroupNorm(num_groups=8, num_channels=64)")
    written = task("(lambda z: z + z)(F.leaky_relu((lambda g: ((g - g.mean(-1, keepdim=True)) / torch.sqrt("
                   "g.var(-1, keepdim=True, unbiased=False) + 1e-5)).view(16, 64) * self.w + self.b)("
                   "self.proj(x).view(16, 8, 8)), 0.01))",
                   "self.proj = nn.Linear(32, 64)\n        self.w = nn.Parameter(torch.ones(64))\n"
                   "        self.b = nn.Parameter(torch.zeros(64))")
    for code in (renamed, written):
        v = d.judge(code)
        assert (v.score, v.signal, v.closest) == (1.0, "graph", "level2/62_Matmul_GroupNorm_LeakyReLU_Sum"), v
