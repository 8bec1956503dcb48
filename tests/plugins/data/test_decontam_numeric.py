"""The decontam filter's numeric signal (kag.plugins.data.decontam_numeric): tasks that compute what a
benchmark task computes, however they are spelled or sized, and only those."""

from __future__ import annotations

import time

from kag.plugins.data.decontam import Decontaminator
import functools

from kag.plugins.data.decontam_numeric import check, load, matches, same

SOFTMAX = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
def get_inputs():
    return [torch.rand(4096, 393216)]
def get_init_inputs():
    return []
'''
SWISH = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor
    def forward(self, x):
        x = self.matmul(x)
        x = x * torch.sigmoid(x)
        return x * self.scaling_factor
def get_inputs():
    return [torch.rand(128, 32768)]
def get_init_inputs():
    return [32768, 32768, 2.0]
'''
SOFTMAX_WRITTEN = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, t):
        e = torch.exp(t - t.max(dim=1, keepdim=True).values)
        return e / e.sum(dim=1, keepdim=True)
def get_inputs():
    return [torch.rand(16, 256)]
def get_init_inputs():
    return []
'''
SWISH_AS_WEIGHTS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
class Model(nn.Module):
    def __init__(self, n_in, n_out, s):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n_out, n_in))
        self.b = nn.Parameter(torch.randn(n_out))
        self.s = s
    def forward(self, x):
        return F.silu(x @ self.w.t() + self.b) * self.s
def get_inputs():
    return [torch.rand(8, 64)]
def get_init_inputs():
    return [64, 32, 2.0]
'''
LOG_SOFTMAX = SOFTMAX_WRITTEN.replace("return e / e.sum(dim=1, keepdim=True)", "return torch.log(e / e.sum(dim=1, keepdim=True))")
SLOW = SOFTMAX.replace("return torch.softmax(x, dim=1)", "import time; time.sleep(30); return x")


def refs(*codes: tuple[str, str]) -> list:
    return [(name, load(code)) for name, code in codes]


def test_a_spelling_or_size_of_a_benchmark_task_is_that_task():
    references = refs(("level1/23_Softmax", SOFTMAX), ("level2/59_Matmul_Swish_Scaling", SWISH))
    assert check(SOFTMAX_WRITTEN, references) == (["level1/23_Softmax"], "")
    assert check(SWISH_AS_WEIGHTS, references) == (["level2/59_Matmul_Swish_Scaling"], "")  # a layer as its weights
    assert check(LOG_SOFTMAX, references) == ([], "")  # another function of the same shape


def test_a_slow_reference_costs_its_limit_and_a_hanging_candidate_gets_no_verdict():
    references = refs(("slow", SLOW), ("level1/23_Softmax", SOFTMAX))
    t0 = time.monotonic()
    quick = functools.partial(matches, pair_limit_s=1.0)
    assert check(SOFTMAX_WRITTEN, references, run=quick)[0] == ["level1/23_Softmax"]
    assert time.monotonic() - t0 < 15
    found, why = check(SLOW, refs(("level1/23_Softmax", SOFTMAX)), limit_s=3)
    assert found is None and "3 s" in why


def test_constant_or_different_outputs_are_not_the_same_function():
    import torch

    assert not same(torch.zeros(4, 4), torch.zeros(4, 4))  # any task that returns zeros
    assert same(torch.arange(6.0), torch.arange(6.0) + 1e-7)
    assert not same(torch.arange(6.0), torch.arange(6.0).reshape(2, 3))


def test_the_filter_drops_what_the_op_graph_keeps():
    dec = Decontaminator(threshold=0.9, op_graph=False)
    dec.add_reference([("level1/23_Softmax", SOFTMAX), ("level2/59_Matmul_Swish_Scaling", SWISH)])
    v = dec.judge(SWISH_AS_WEIGHTS)
    assert (v.score, v.closest, v.signal) == (1.0, "level2/59_Matmul_Swish_Scaling", "numeric")
    assert dec.judge(LOG_SOFTMAX).score < 0.9
    off = Decontaminator(threshold=0.9, op_graph=False, numeric=False)
    off.add_reference([("level2/59_Matmul_Swish_Scaling", SWISH)])
    assert off.judge(SWISH_AS_WEIGHTS).signal != "numeric"
