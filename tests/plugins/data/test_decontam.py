"""Decontamination: a benchmark task fed back scores 1.0, a near-copy > 0.9, an unrelated task less."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kag.core.plugins import Plugins
from kag.plugins.data.decontam import similarity, structural_tokens

KB = Path("/work/shared/kernelbench")

# KernelBench level2/1_Conv2D_ReLU_BiasAdd.py (MIT), verbatim
CONV_RELU_BIAS = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a convolution, applies ReLU, and adds a bias term.
    """
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        return x

batch_size = 128
in_channels  = 64
out_channels = 128
height = width = 128
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
'''
# renamed variables and attributes, reordered imports, other sizes, no docstring
NEAR_COPY = '''import torch.nn as nn
import torch

class Model(nn.Module):
    def __init__(self, cin, cout, k, shape):
        super(Model, self).__init__()
        self.convolution = nn.Conv2d(cin, cout, k)
        self.offset = nn.Parameter(torch.randn(shape))

    def forward(self, inp):
        inp = self.convolution(inp)
        inp = torch.relu(inp)
        inp = inp + self.offset
        return inp

def get_inputs():
    return [torch.rand(4, 3, 32, 32)]

def get_init_inputs():
    return [3, 8, 5, (8, 1, 1)]
'''
UNRELATED = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.LSTM(64, 128, batch_first=True)
        self.op1 = nn.LayerNorm((128,))

    def forward(self, x):
        x = self.op0(x)[0]
        x = self.op1(x)
        x = torch.cumsum(x, dim=1)
        return x


def get_inputs():
    return [torch.rand(8, 16, 64)]


def get_init_inputs():
    return []
'''


def make():
    dec = Plugins().create("filter", "decontam", threshold=0.9)
    dec.add_reference([("level2/1_Conv2D_ReLU_BiasAdd", CONV_RELU_BIAS)])
    return dec


def test_benchmark_task_scores_one_and_is_dropped():
    dec = make()
    score, match = dec.score(CONV_RELU_BIAS)
    assert score == 1.0 and match == "level2/1_Conv2D_ReLU_BiasAdd" and not dec.keep(score)


def test_near_copy_is_above_threshold():
    score, _ = make().score(NEAR_COPY)
    assert score > 0.9


def test_unrelated_task_is_kept():
    dec = make()
    score, _ = dec.score(UNRELATED)
    assert score < 0.9 and dec.keep(score)


def test_tokens_keep_the_torch_api_and_drop_names():
    toks = structural_tokens(CONV_RELU_BIAS)
    assert "Attr:Conv2d" in toks and "Attr:relu" in toks
    assert structural_tokens(CONV_RELU_BIAS) == structural_tokens(NEAR_COPY)
    assert similarity(structural_tokens(CONV_RELU_BIAS), structural_tokens(UNRELATED)) < 0.9


def test_report_files(tmp_path):
    dec = make()
    dec.write_report([0.1, 0.5, 1.0], tmp_path)
    data = json.loads((tmp_path / "decontam.json").read_text())
    assert data["dropped"] == 1 and sum(data["histogram"]["counts"]) == 3
    assert (tmp_path / "decontam_hist.png").stat().st_size > 1000


@pytest.mark.skipif(not KB.is_dir(), reason="KernelBench checkout not at /work/shared/kernelbench")
def test_every_kernelbench_task_flags_itself():
    from kag.plugins.datasets.kernelbench import KernelBenchDataset

    tasks = KernelBenchDataset(str(KB), level="1,2").load(execute=False).tasks
    dec = Plugins().create("filter", "decontam")
    dec.add_reference((t.name, t.code) for t in tasks)
    for t in tasks[::10]:
        assert dec.score(t.code)[0] == 1.0, t.name
