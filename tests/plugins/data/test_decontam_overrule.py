"""Decontamination: an op-multiset (or a traced task's AST) match says "the same ops, wired otherwise";
running both tasks built alike settles whether that is a rewrite of the benchmark task (kept as a
match) or another function (overruled), also when the two take other constructor arguments."""

from __future__ import annotations

import ast

from kag.plugins.data.decontam import Decontaminator
from kag.plugins.data.decontam_numeric import by_name, compare, load, scaled
from tests.conftest import SAMPLE

# KernelBench level2/76_Gemm_Add_ReLU (MIT), docstrings left out: its sizes would take seconds on a CPU
GEMM_ADD_RELU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.gemm(x)
        x = x + self.bias
        x = torch.relu(x)
        return x

batch_size = 1024
in_features = 8192
out_features = 8192
bias_shape = (out_features,)

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, bias_shape]
'''


def task(forward: str, args: str, init: str, inputs: str, init_inputs: str) -> str:
    return ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
            f"class Model(nn.Module):\n    def __init__(self, {args}):\n        super().__init__()\n"
            f"        {init}\n\n    def forward(self, x):\n        return {forward}\n\n"
            f"def get_inputs():\n    return [{inputs}]\n\ndef get_init_inputs():\n    return [{init_inputs}]\n")


GEMM_INIT = "self.gemm = nn.Linear(in_features, out_features, bias=False)\n        " \
            "self.bias = nn.Parameter(torch.randn(out_features))"
# the bias after the ReLU: the same op multiset, another function, and no bias_shape argument
RELU_THEN_BIAS = task("torch.relu(self.gemm(x)) + self.bias", "in_features, out_features", GEMM_INIT,
                      "torch.rand(64, 96)", "96, 80")
# the same function, wired otherwise (relu(b + xW) is relu(xW + b)) but as a bias_shape-free constructor
BIAS_THEN_RELU = task("torch.relu(self.bias + self.gemm(x))", "in_features, out_features", GEMM_INIT,
                      "torch.rand(64, 96)", "96, 80")
LEVEL2_12 = "level2/12_Gemm_Multiply_LeakyReLU"


def filters(*refs: tuple[str, str]) -> tuple[Decontaminator, Decontaminator]:
    on, off = Decontaminator(threshold=0.9), Decontaminator(threshold=0.9, numeric=False)
    for d in (on, off):
        d.add_reference(refs)
    return on, off


def test_scaled_sizes_keep_dividing_each_other():
    code = scaled("a = 8192\nb = 512\nc = (4096, 3)\nd = 7\ne = 2.0\n")
    values = {n.targets[0].id: ast.literal_eval(n.value) for n in ast.parse(code).body}
    assert values == {"a": 128, "b": 8, "c": (64, 3), "d": 7, "e": 2.0}


def test_constructor_arguments_are_matched_by_name():
    small = load(scaled(GEMM_ADD_RELU))
    init = small["get_init_inputs"]()
    assert by_name(load(RELU_THEN_BIAS)["Model"], small["Model"], init) == {"in_features": 128, "out_features": 128}
    renamed = RELU_THEN_BIAS.replace("in_features", "n_in")
    assert by_name(load(renamed)["Model"], small["Model"], init) is None  # nothing to build it with


def test_other_outputs_overrule_a_multiset_match_of_other_arguments():
    on, off = filters(("level2/76_Gemm_Add_ReLU", GEMM_ADD_RELU))
    assert compare(RELU_THEN_BIAS, load(GEMM_ADD_RELU), GEMM_ADD_RELU)[0] == "different"
    v = off.judge(RELU_THEN_BIAS)
    assert (v.score, v.signal) == (1.0, "graph_multiset"), v  # numeric off: the multiset alone drops it
    v = on.judge(RELU_THEN_BIAS)
    assert on.keep(v.score) and v.signal != "graph_multiset" and "other outputs" in v.note, v


def test_the_same_function_wired_otherwise_is_still_dropped():
    on, _ = filters(("level2/76_Gemm_Add_ReLU", GEMM_ADD_RELU), (LEVEL2_12, (SAMPLE / f"{LEVEL2_12}.py").read_text()))
    assert compare(BIAS_THEN_RELU, load(GEMM_ADD_RELU), GEMM_ADD_RELU)[0] == "same"
    assert not on.keep(on.judge(BIAS_THEN_RELU).score)
    moved = task("F.leaky_relu(self.gemm(x), self.negative_slope) * self.multiplier",
                 "in_features, out_features, multiplier, negative_slope",
                 "self.gemm = nn.Linear(in_features, out_features)\n        self.multiplier = multiplier\n"
                 "        self.negative_slope = negative_slope", "torch.rand(64, 96)", "96, 48, 2.0, 0.1")
    v = on.judge(moved)  # a positive scale moved through the LeakyReLU: equal outputs
    assert (v.score, v.closest, v.signal) == (1.0, LEVEL2_12, "graph_multiset"), v


def test_other_outputs_overrule_a_token_match_of_a_traced_task():
    gemm_sigmoid_lse = task("torch.logsumexp(self.linear2(torch.sigmoid(self.linear1(x))), dim=1)",
                            "input_size, hidden_size, output_size",
                            "self.linear1 = nn.Linear(input_size, hidden_size)\n"
                            "        self.linear2 = nn.Linear(hidden_size, output_size)",
                            "torch.rand(16, 48)", "48, 64, 32")
    moved = gemm_sigmoid_lse.replace("torch.logsumexp(self.linear2(torch.sigmoid(self.linear1(x))), dim=1)",
                                     "torch.sigmoid(torch.logsumexp(self.linear2(self.linear1(x)), dim=1))")
    on, off = filters(("level2/45_Gemm_Sigmoid_LogSumExp", gemm_sigmoid_lse))
    assert not off.keep(off.judge(moved).score)
    v = on.judge(moved)
    assert on.keep(v.score) and "other outputs" in v.note, v
